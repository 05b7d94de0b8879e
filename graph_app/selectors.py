"""Reads on the knowledge graph: rows as their typed outputs, entities with their history and ego
graph, time travel, integrity verification and the list queries of the API.

Every read answers an Output model of ``graph_app.contracts.graph`` (real datetimes; adapters
render them with ``as_json()``). List queries only scope and order: their filters are the
FilterSets of ``graph_app.api.filters``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from django.db import connection, transaction
from django.db.models import Count, Model, Q, QuerySet

from graph_app.contracts.graph import (
    ChainState,
    CheckpointCheck,
    EgoEdge,
    EgoGraph,
    EgoNode,
    EntityOut,
    EntityQueryInput,
    EntityQueryResult,
    EpisodeCounts,
    EpisodeGetInput,
    EpisodeOut,
    EpisodePreview,
    ErasedRecord,
    FactCounts,
    FactGetInput,
    FactOut,
    GraphSummary,
    IntegrityInput,
    IntegrityProblem,
    IntegrityResult,
    Mismatch,
    RecentEpisodes,
    TimeTravelInput,
    TimeTravelResult,
)
from graph_app.domain.egograph import Edge, ego_graph
from graph_app.domain.hashing import canonical_json, merkle_root, sha256_hex
from graph_app.domain.records import (
    closure_known,
    entity_canonical,
    episode_canonical,
    fact_as_known_at,
    fact_canonical,
    sha256_of,
)
from graph_app.domain.render import cited_id
from graph_app.domain.sealing import (
    ChainReport,
    ChangeEntry,
    FoundRecord,
    Key,
    Problem,
    chain_verify,
    checkpoint_verify,
    head_verify,
    records_verify,
    unsealed_problems,
)
from graph_app.models import (
    GENESIS_HASH,
    Entity,
    Episode,
    EpisodeCategory,
    EpisodeFile,
    GraphChange,
    GraphRevision,
    TemporalFact,
)
from memoryproject.contracts import takes
from memoryproject.errors import NotFoundError
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

EGO_CHUNK = 5_000
FACT_RELATED = ("project", "subject", "object_entity")

#: A fact's canonical fields (graph_app.domain.records.fact_canonical, less the project) and the
#: column each is read from; they are also the fields of its output.
FACT_CANONICAL_COLUMNS = {
    "id": "id",
    "subject": "subject__slug",
    "predicate": "predicate",
    "object_value": "object_value",
    "object_entity": "object_entity__slug",
    "singular": "singular",
    "confidence": "confidence",
    "valid_from": "valid_from",
    "valid_until": "valid_until",
    "recorded_at": "recorded_at",
    "closed_at": "closed_at",
    "superseded_by": "superseded_by_id",
    "source_episode": "source_episode_id",
}
#: The columns every read of a fact's values uses: its canonical fields and its stored hash.
FACT_VALUE_FIELDS = (*FACT_CANONICAL_COLUMNS.values(), "sha256")
#: An episode's canonical fields (graph_app.domain.records.episode_canonical, less the project).
EPISODE_VALUE_FIELDS = (
    "id",
    "category",
    "title",
    "content",
    "files_touched",
    "entities_mentioned",
    "metadata",
    "occurred_at",
    "recorded_at",
    "external_id",
)

#: An entity's canonical fields (graph_app.domain.records.entity_canonical, less the project;
#: its id is its slug).
ENTITY_VALUE_FIELDS = ("slug", "kind", "name", "aliases", "created_at")

M = TypeVar("M", bound=Model)
E = TypeVar("E", bound=EpisodeOut)


# --- rows, canonical forms and outputs --------------------------------------------------------


def instance_row(instance: Model, columns: Iterable[str]) -> dict[str, Any]:
    """``instance`` as the ``values(*columns)`` row the database would answer (related rows
    loaded): lets a write hash what a read will verify through the same function."""
    row: dict[str, Any] = {}
    for column in columns:
        value: Any = instance
        for part in column.split("__"):
            value = getattr(value, part) if value is not None else None
        row[column] = value
    return row


def _fact_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: row[column] for name, column in FACT_CANONICAL_COLUMNS.items()}


def fact_canonical_of(row: Mapping[str, Any], project_slug: str) -> dict[str, Any]:
    """The canonical form of a FACT_VALUE_FIELDS row (spelled out: verification builds one
    per fact)."""
    return fact_canonical(
        project=project_slug,
        id=row["id"],
        subject=row["subject__slug"],
        predicate=row["predicate"],
        object_value=row["object_value"],
        object_entity=row["object_entity__slug"],
        singular=row["singular"],
        confidence=row["confidence"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        recorded_at=row["recorded_at"],
        closed_at=row["closed_at"],
        superseded_by=row["superseded_by_id"],
        source_episode=row["source_episode_id"],
    )


def episode_canonical_of(row: Mapping[str, Any], project_slug: str) -> dict[str, Any]:
    """The canonical form of an EPISODE_VALUE_FIELDS row."""
    values = {name: row[name] for name in EPISODE_VALUE_FIELDS}
    # A JSON column nulled behind the application's back still hashes (and so mismatches).
    values["files_touched"] = values["files_touched"] or []
    values["entities_mentioned"] = values["entities_mentioned"] or []
    values["metadata"] = values["metadata"] or {}
    return episode_canonical(project=project_slug, **values)


def entity_canonical_of(row: Mapping[str, Any], project_slug: str) -> dict[str, Any]:
    """The canonical form of an ENTITY_VALUE_FIELDS row."""
    return entity_canonical(
        id=row["slug"],
        project=project_slug,
        kind=row["kind"],
        name=row["name"],
        aliases=row["aliases"] or [],
        created_at=row["created_at"],
    )


def entity_sha256(entity: Entity, project: Project) -> str:
    """The SHA-256 the change log seals ``entity`` with (``project`` is its project)."""
    return sha256_of(entity_canonical_of(instance_row(entity, ENTITY_VALUE_FIELDS), project.slug))


def _status(valid_until: object, superseded_by: object) -> str:
    if valid_until is None:
        return "active"
    return "superseded" if superseded_by else "retracted"


def fact_view(fact: TemporalFact) -> FactOut:
    return FactOut(
        **_fact_fields(instance_row(fact, FACT_VALUE_FIELDS)),
        project=fact.project.slug,
        status=fact.status,
        sha256=fact.sha256,
        revision=fact.revision,
    )


def episode_view(episode: Episode, output: type[E] = EpisodeOut, **extra: Any) -> E:  # type: ignore[assignment]
    """The episode as ``output``: EpisodeOut, or a model extending it with the fields
    ``extra`` gives (which may also replace the episode's own)."""
    fields = instance_row(episode, EPISODE_VALUE_FIELDS)
    fields.update(project=episode.project.slug, sha256=episode.sha256, revision=episode.revision)
    return output(**{**fields, **extra})


def entity_view(entity: Entity) -> EntityOut:
    return EntityOut(
        id=entity.slug,
        kind=entity.kind,
        name=entity.name,
        aliases=list(entity.aliases),
        created_at=entity.created_at,
    )


# --- revision ---------------------------------------------------------------------------------


def graph_revision_current(*, project: Project) -> int:
    """The project's graph revision: 0 before its first write."""
    row = GraphRevision.objects.filter(project=project).values_list("revision", flat=True).first()
    return int(row or 0)


# --- lists and single items -------------------------------------------------------------------


def valid_at(at: datetime) -> Q:
    """Facts valid at instant ``at`` (valid time, as recorded now)."""
    return Q(valid_from__lte=at) & (Q(valid_until__isnull=True) | Q(valid_until__gt=at))


def valid_now() -> Q:
    """Facts valid at this instant: the current truth (a scheduled fact is not yet, a fact
    whose successor is due later still is)."""
    return valid_at(utcnow())


def valid_as_known(as_of: datetime, known_at: datetime) -> Q:
    """Facts valid at ``as_of`` as they were known at transaction time ``known_at``: recorded
    by then, and open then (a closure recorded after ``known_at`` had not happened yet)."""
    return Q(recorded_at__lte=known_at, valid_from__lte=as_of) & (
        Q(valid_until__isnull=True) | Q(valid_until__gt=as_of) | Q(closed_at__gt=known_at)
    )


def facts_query(*, project: Project) -> QuerySet[TemporalFact]:
    """The project's facts, oldest recorded first (filtered by graph_app.api.filters)."""
    qs = TemporalFact.objects.filter(project=project).select_related(*FACT_RELATED)
    return qs.order_by("recorded_at", "id")


def episodes_query(*, project: Project) -> QuerySet[Episode]:
    """The project's episodes, latest occurred first (filtered by graph_app.api.filters)."""
    qs = Episode.objects.filter(project=project).select_related("project")
    return qs.order_by("-occurred_at", "id")


def entities_query(*, project: Project) -> QuerySet[Entity]:
    """The project's entities by id (filtered by graph_app.api.filters)."""
    return Entity.objects.filter(project=project).order_by("slug")


def _visible(
    rows: QuerySet[M], pk: str, project_ids: Iterable[int] | None, *, field: str, noun: str
) -> M:
    qs = rows.filter(pk=pk)
    if project_ids is not None:
        qs = qs.filter(project_id__in=list(project_ids))
    row = qs.first()
    if row is None:
        raise NotFoundError(f"{field}: no {noun} '{pk}'", field=field)
    return row


def fact_find(*, fact_id: str, project_ids: Iterable[int] | None) -> TemporalFact:
    """A fact by id, or by its citation (``[FACT:fact_...]``), within ``project_ids`` (None:
    any project), or 404."""
    facts = TemporalFact.objects.select_related(*FACT_RELATED)
    return _visible(facts, cited_id(fact_id), project_ids, field="fact_id", noun="fact")


def episode_find(*, episode_id: str, project_ids: Iterable[int] | None) -> Episode:
    """An episode by its id, its own ``external_id`` or its citation as a bundle shows it
    (``[ADR:ADR-12]``), within ``project_ids`` (None: any project), or 404. An internal id
    wins over an external one of the same text."""
    reference = cited_id(episode_id)
    episodes = Episode.objects.select_related("project")
    if project_ids is not None:
        episodes = episodes.filter(project_id__in=list(project_ids))
    found = episodes.filter(pk=reference).first() or (
        episodes.filter(external_id=reference).order_by("project_id").first()
    )
    if found is None:
        raise NotFoundError(f"episode_id: no episode '{episode_id}'", field="episode_id")
    return found


@takes(FactGetInput)
def fact_get(*, project: Project, params: FactGetInput) -> FactOut:
    return fact_view(fact_find(fact_id=params.fact_id, project_ids=[project.pk]))


@takes(EpisodeGetInput)
def episode_get(*, project: Project, params: EpisodeGetInput) -> EpisodeOut:
    return episode_view(episode_find(episode_id=params.episode_id, project_ids=[project.pk]))


def episodes_recent(*, project: Project, limit: int, preview_chars: int) -> RecentEpisodes:
    """The ``limit`` latest episodes, their content cut to ``preview_chars``."""
    previews = []
    for episode in episodes_query(project=project)[:limit]:
        content = episode.content
        previews.append(
            episode_view(
                episode,
                EpisodePreview,
                content=content[:preview_chars],
                content_truncated=len(content) > preview_chars,
            )
        )
    return RecentEpisodes(project=project.slug, count=len(previews), episodes=previews)


# --- entity query -----------------------------------------------------------------------------


@takes(EntityQueryInput)
def entity_query(*, project: Project, params: EntityQueryInput) -> EntityQueryResult:
    """An entity with the facts valid now, its history (superseded and retracted facts, with
    their validity and successor), its scheduled facts, the episodes that mention it or are the
    source of its facts, and its ego graph: every entity within ``max_hops`` over the edges
    valid now, in either direction.

    History is always answered; ``include_superseded`` also lists those facts among ``facts``.
    """
    entity = Entity.objects.filter(project=project, slug=params.entity_id).first()
    if entity is None:
        raise NotFoundError(f"entity_id: no entity '{params.entity_id}'", field="entity_id")
    own = [fact_view(f) for f in _entity_facts(entity)]
    lists: dict[str, list[Any]] = {
        "facts": own if params.include_superseded else [f for f in own if f.status == "active"],
        "history": [f for f in own if f.status in ("superseded", "retracted")],
        "scheduled": [f for f in own if f.status == "scheduled"],
        "episodes": _entity_episodes(entity),
    }
    start, end = params.offset, params.offset + params.limit
    pages = {name: items[start:end] for name, items in lists.items()}
    return EntityQueryResult(
        entity=entity_view(entity),
        facts=pages["facts"],
        history=pages["history"],
        scheduled=pages["scheduled"],
        episodes=[episode_view(e) for e in pages["episodes"]],
        ego_graph=_ego_graph(entity, params.max_hops),
        totals={name: len(items) for name, items in lists.items()},
        next_offset=end if any(len(items) > end for items in lists.values()) else None,
    )


def _entity_facts(entity: Entity) -> list[TemporalFact]:
    """The facts with the entity as subject or object, by subject, predicate and time."""
    # Entities belong to one project, so the entity's row id alone selects its facts; leaving
    # the project out lets each lookup use its foreign-key index (one per direction).
    as_subject = TemporalFact.objects.filter(subject=entity).select_related(*FACT_RELATED)
    as_object = (
        TemporalFact.objects.filter(object_entity=entity)
        .exclude(subject=entity)
        .select_related(*FACT_RELATED)
    )
    return sorted(
        [*as_subject.order_by(), *as_object.order_by()],
        key=lambda f: (f.subject.slug, f.predicate, f.valid_from, f.recorded_at, f.id),
    )


def _entity_episodes(entity: Entity) -> list[Episode]:
    """Episodes that mention the entity or are the source of its facts, latest first."""
    episode_ids = set(
        TemporalFact.objects.filter(subject=entity, source_episode__isnull=False)
        .order_by()
        .values_list("source_episode_id", flat=True)
    )
    episode_ids.update(
        Episode.entities.through.objects.filter(entity_id=entity.pk).values_list(
            "episode_id", flat=True
        )
    )
    return sorted(
        Episode.objects.filter(id__in=episode_ids).select_related("project").order_by(),
        key=lambda e: (-e.occurred_at.timestamp(), e.id),
    )


_EDGE_COLUMNS = (
    "id",
    "subject__slug",
    "predicate",
    "object_entity__slug",
    "subject_id",
    "object_entity_id",
    "subject__kind",
    "object_entity__kind",
)


def entity_neighbourhood(
    *,
    entity: Entity,
    max_hops: int = 2,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> EgoGraph:
    """The entity's ego graph over the edges valid at ``as_of`` as known at ``known_at``
    (both default to now): every entity within ``max_hops``, in either direction."""
    now = utcnow()
    return _ego_graph(entity, max_hops, valid_as_known(as_of or now, known_at or now))


def _ego_graph(entity: Entity, max_hops: int, edges: Q | None = None) -> EgoGraph:
    """Every entity within ``max_hops`` of ``entity`` over the ``edges`` (default: the active
    ones), either direction."""
    # Walk by entity row id so every hop is answered from the foreign-key indexes.
    ids = {entity.slug: entity.pk}
    kinds = {entity.slug: entity.kind}
    edge_filter = valid_now() if edges is None else edges
    active_edges = TemporalFact.objects.filter(edge_filter, object_entity__isnull=False).order_by()

    def edges_touching(nodes: set[str]) -> Iterator[Edge]:
        wanted = [ids[node] for node in nodes]
        seen: set[str] = set()
        # One lookup per foreign-key index instead of an OR that scans; chunks stay under the
        # databases' bound-parameter limits on wide frontiers.
        for lookup in ("subject_id__in", "object_entity_id__in"):
            for start in range(0, len(wanted), EGO_CHUNK):
                chunk = wanted[start : start + EGO_CHUNK]
                rows = active_edges.filter(**{lookup: chunk}).values_list(*_EDGE_COLUMNS)
                for fact_id, source, predicate, target, s_pk, t_pk, s_kind, t_kind in rows:
                    if fact_id in seen:
                        continue
                    seen.add(fact_id)
                    ids.setdefault(source, s_pk)
                    ids.setdefault(target, t_pk)
                    kinds.setdefault(source, s_kind)
                    kinds.setdefault(target, t_kind)
                    yield Edge(fact_id=fact_id, source=source, predicate=predicate, target=target)

    ego = ego_graph(entity.slug, max_hops, edges_touching)
    hops = sorted(ego.distances.items(), key=lambda kv: (kv[1], kv[0]))
    return EgoGraph(
        max_hops=max_hops,
        nodes=[EgoNode(id=node, kind=kinds.get(node, ""), hops=n) for node, n in hops],
        edges=[
            EgoEdge(fact_id=e.fact_id, source=e.source, predicate=e.predicate, target=e.target)
            for e in ego.edges
        ],
    )


# --- time travel ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VisibleFact:
    """A fact as it read at some transaction time: its canonical form then, that form's
    canonical JSON (its Merkle leaf) and its output (hash of the form as then known)."""

    canonical: dict[str, Any]
    leaf: bytes
    fact: FactOut

    @property
    def view(self) -> dict[str, Any]:
        return self.fact.as_json()


def _visible_as_known(row: Mapping[str, Any], project_slug: str, known_at: datetime) -> VisibleFact:
    seen = fact_as_known_at(
        fact_canonical_of(row, project_slug), closed_at=row["closed_at"], known_at=known_at
    )
    leaf = canonical_json(seen)
    fact = FactOut.model_validate(
        {
            **seen,
            "status": _status(seen["valid_until"], seen["superseded_by"]),
            "sha256": sha256_hex(leaf),
        }
    )
    return VisibleFact(canonical=seen, leaf=leaf, fact=fact)


def facts_visible_at(
    *, project: Project, as_of: datetime, known_at: datetime, entity: Entity | None = None
) -> list[VisibleFact]:
    """The facts valid at ``as_of`` as they were known at ``known_at``, sorted by id (with
    ``entity``: only those with it as subject or object).

    Transaction time first: a fact recorded after ``known_at`` is invisible, and a closure
    recorded after ``known_at`` had not happened yet (the fact reads as open). Then valid time:
    ``valid_from <= as_of < valid_until``. History rows are never rewritten, so a backdated fact
    may overlap an older closed one; for a singular predicate the fact starting latest wins.
    """
    facts = TemporalFact.objects.filter(valid_as_known(as_of, known_at), project=project)
    if entity is not None:
        # Its own facts, and those of the subjects pointing at it under the same predicates:
        # among them the rivals that decide which singular fact wins (a superset, read through
        # the subject index; the facts not naming the entity are dropped below).
        pointing = TemporalFact.objects.filter(object_entity=entity).order_by()
        facts = facts.filter(
            Q(subject=entity)
            | Q(
                subject_id__in=pointing.values("subject_id"),
                predicate__in=pointing.values("predicate"),
            )
        )
    rows = facts.values(*FACT_VALUE_FIELDS)
    visible: list[VisibleFact] = []
    winners: dict[tuple[str, str], tuple[datetime, datetime, str]] = {}
    for row in rows:
        known_closed = closure_known(row["closed_at"], known_at)
        if known_closed and row["valid_until"] is not None and row["valid_until"] <= as_of:
            continue
        visible.append(_visible_as_known(row, project.slug, known_at))
        if row["singular"]:
            key = (row["subject__slug"], row["predicate"])
            rank = (row["valid_from"], row["recorded_at"], row["id"])
            if key not in winners or rank > winners[key]:
                winners[key] = rank
    result = [
        f
        for f in visible
        if not f.fact.singular or winners[(f.fact.subject, f.fact.predicate)][2] == f.fact.id
    ]
    if entity is not None:
        result = [f for f in result if entity.slug in (f.fact.subject, f.fact.object_entity)]
    result.sort(key=lambda f: f.fact.id)
    return result


@takes(TimeTravelInput)
def graph_as_of(*, project: Project, params: TimeTravelInput) -> TimeTravelResult:
    """The facts valid at ``as_of`` as known at transaction time ``known_at`` (default: now),
    with a snapshot hash: the RFC 6962 Merkle root over their canonical forms as then known
    (each fact's ``sha256`` is that of its form as then known)."""
    known_at = params.known_at or utcnow()
    facts = facts_visible_at(project=project, as_of=params.as_of, known_at=known_at)
    end = params.offset + params.limit
    return TimeTravelResult(
        project=project.slug,
        as_of=params.as_of,
        known_at=known_at,
        count=len(facts),
        snapshot_hash=merkle_root([f.leaf for f in facts]),
        facts=[f.fact for f in facts[params.offset : end]],
        next_offset=end if len(facts) > end else None,
    )


# --- integrity --------------------------------------------------------------------------------

#: The columns of a change log entry, in the order of graph_app.domain.sealing.ChangeEntry.
CHANGE_FIELDS = (
    "seq",
    "revision",
    "action",
    "record_type",
    "record_id",
    "record_sha256",
    "erased_sha256",
    "note",
    "recorded_at",
    "prev_hash",
    "hash",
)
_CHUNK = 5_000


def graph_chain_head(project: Project) -> tuple[int, str]:
    """The project's graph change log as a checkpoint records it: (size, hash of the last
    entry); (0, the genesis hash) before its first write."""
    last = (
        GraphChange.objects.filter(project=project)
        .order_by("-seq")
        .values_list("seq", "hash")
        .first()
    )
    return (int(last[0]), str(last[1])) if last else (0, GENESIS_HASH)


#: A fact's datetime columns.
FACT_TIMES = ("valid_from", "valid_until", "recorded_at", "closed_at")


def _rows_read(
    rows: QuerySet[Any], columns: tuple[str, ...], times: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    """``rows.values(*columns)`` read by the database driver alone, ``times`` made aware
    UTC (SQLite's driver hands them naive): verification reads every row, and the ORM's
    per-row conversions would cost more than hashing them. Only for columns the driver reads
    as their Python values (not JSON)."""
    sql, params = rows.values_list(*columns).query.sql_with_params()
    with connection.chunked_cursor() as cursor:
        cursor.execute(_times_as_text(sql, rows.model, times), params)
        while chunk := cursor.fetchmany(_CHUNK):
            for values in chunk:
                row = dict(zip(columns, values, strict=True))
                for name in times:
                    row[name] = _utc(row[name])
                yield row


def _times_as_text(sql: str, model: type[Model], times: tuple[str, ...]) -> str:
    """On SQLite, ``sql`` reading the ``times`` columns of ``model``'s table as text, which
    the C ISO parser reads faster than the driver's converter does."""
    if connection.vendor != "sqlite":
        return sql
    table = model._meta.db_table
    for name in times:
        column = f'"{table}"."{name}"'
        sql = sql.replace(column, f"CAST({column} AS TEXT)", 1)
    return sql


def _utc(value: Any) -> Any:
    """A datetime read raw, aware UTC: SQLite keeps naive UTC text, PostgreSQL answers aware
    datetimes. Text that is no timestamp (written behind the application's back) reads as
    None, as the ORM would read it, so the row's hash no longer matches."""
    if type(value) is str:
        try:  # Django stores "YYYY-MM-DD HH:MM:SS[.ffffff]" in UTC: one parse
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:
            pass
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _change_entries(project: Project) -> Iterator[ChangeEntry]:
    """The project's change log in seq order, read by one raw statement: verification reads
    every entry, and the ORM's per-row conversions would cost more than hashing them."""
    table = GraphChange._meta.db_table
    columns = ", ".join(f'"{table}"."{name}"' for name in CHANGE_FIELDS)
    sql = f'SELECT {columns} FROM "{table}" WHERE "{table}"."project_id" = %s ORDER BY 1, "id"'
    with connection.chunked_cursor() as cursor:
        cursor.execute(_times_as_text(sql, GraphChange, ("recorded_at",)), [project.pk])
        while rows := cursor.fetchmany(_CHUNK):
            for row in rows:
                yield ChangeEntry._make((*row[:8], _utc(row[8]), row[9], row[10]))


def _chain_read(project: Project, checkpoint: tuple[int, str] | None) -> tuple[ChainReport, int]:
    """Replays the project's change log: the chain, its head and the checkpoint; answers it
    with the project's revision."""
    watch = checkpoint[0] if checkpoint else None
    report = chain_verify(_change_entries(project), project=project.slug, watch=watch)
    head = GraphRevision.objects.filter(project=project)
    stored = head.values_list("revision", "changes", "head_hash").first()
    revision, size, head_hash = stored or (0, 0, GENESIS_HASH)
    head_verify(report, size=int(size), head=str(head_hash))
    if checkpoint is not None:
        checkpoint_verify(report, size=checkpoint[0], head=checkpoint[1])
    return report, int(revision)


@contextmanager
def _snapshot() -> Iterator[None]:
    """One consistent state of the graph for all of verification's reads, so that a write
    committed meanwhile is never half seen (its rows without its log entries, or the reverse):
    a repeatable-read transaction on PostgreSQL; on SQLite the transaction holds the write
    lock while verification reads (writers wait)."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _verify(
    kind: Literal["fact", "episode"],
    rows: Iterable[Mapping[str, Any]],
    canonical_of: Callable[[Mapping[str, Any], str], dict[str, Any]],
    project_slug: str,
    leaves: list[bytes],
    mismatches: list[Mismatch],
    found: dict[Key, FoundRecord],
) -> int:
    """Appends each row's canonical JSON to ``leaves``, a Mismatch for each row whose stored
    hash differs from it, and what was found to ``found``; answers how many rows there were."""
    count = 0
    for row in rows:
        data = canonical_json(canonical_of(row, project_slug))
        computed = sha256_hex(data)
        stored_matches = computed == row["sha256"]
        if not stored_matches:
            mismatches.append(
                Mismatch(kind=kind, id=row["id"], stored=row["sha256"], computed=computed)
            )
        found[(kind, row["id"])] = FoundRecord(computed, stored_matches, row["revision"])
        leaves.append(data)
        count += 1
    return count


def _episode_indexes(project: Project) -> dict[str, tuple[list[str], list[str]]]:
    """Each episode's file paths and linked entity ids, as stored, sorted."""
    indexes: dict[str, tuple[list[str], list[str]]] = {}
    files = EpisodeFile.objects.filter(episode__project=project).values_list("episode_id", "path")
    for episode_id, path in files.order_by().iterator(chunk_size=_CHUNK):
        indexes.setdefault(episode_id, ([], []))[0].append(path)
    links = Episode.entities.through.objects.filter(episode__project=project)
    rows = links.values_list("episode_id", "entity__slug").order_by()
    for episode_id, slug in rows.iterator(chunk_size=_CHUNK):
        indexes.setdefault(episode_id, ([], []))[1].append(slug)
    for paths, slugs in indexes.values():
        paths.sort()
        slugs.sort()
    return indexes


def _index_problem(row: Mapping[str, Any], files: list[str], slugs: list[str]) -> str | None:
    """What is wrong with an episode's file rows and entity links, which must index exactly
    the files_touched and entities_mentioned its hash covers."""
    parts = []
    for noun, stored, recorded in (
        ("file rows", files, sorted(row["files_touched"] or [])),
        ("entity links", slugs, sorted(row["entities_mentioned"] or [])),
    ):
        if stored != recorded:
            missing = sorted(set(recorded) - set(stored))
            extra = sorted(set(stored) - set(recorded))
            said = ", ".join(
                f"{label} {', '.join(values)}"
                for label, values in (("missing", missing), ("unexpected", extra))
                if values
            )
            parts.append(f"its {noun} differ from what it recorded ({said or 'repeated'})")
    return "; ".join(parts) or None


def _entities_found(project: Project, found: dict[Key, FoundRecord]) -> int:
    rows = Entity.objects.filter(project=project).order_by().values(*ENTITY_VALUE_FIELDS)
    count = 0
    for row in rows.iterator(chunk_size=_CHUNK):
        found[("entity", row["slug"])] = FoundRecord(
            sha256_of(entity_canonical_of(row, project.slug))
        )
        count += 1
    return count


_RECORD_ROWS: dict[str, tuple[type[Model], tuple[str, ...], Callable[..., dict[str, Any]]]] = {
    "fact": (TemporalFact, FACT_VALUE_FIELDS, fact_canonical_of),
    "episode": (Episode, EPISODE_VALUE_FIELDS, episode_canonical_of),
    "entity": (Entity, ENTITY_VALUE_FIELDS, entity_canonical_of),
}


def _originals(project: Project, unsealed: list[Key]) -> dict[Key, Key | None]:
    """For each record the log never sealed, the sealed record it copies (same canonical form
    but for its id), if any. Reads the tables again: only runs when something was inserted."""
    originals: dict[Key, Key | None] = {}
    for kind in sorted({k for k, _ in unsealed}):
        model, columns, canonical_of = _RECORD_ROWS[kind]
        wanted = {i for k, i in unsealed if k == kind}
        by_content: dict[str, list[str]] = {}
        for row in model._default_manager.filter(project=project).order_by().values(*columns):
            form = canonical_of(row, project.slug)
            form.pop("id")
            by_content.setdefault(sha256_of(form), []).append(_row_id(row))
        for ids in by_content.values():
            sealed = [i for i in ids if i not in wanted]
            for i in ids:
                if i in wanted:
                    originals[(kind, i)] = (kind, sealed[0]) if sealed else None
    return originals


def _row_id(row: Mapping[str, Any]) -> str:
    """The id of a record row (an entity's id is its slug)."""
    return str(row["id"] if "id" in row else row["slug"])


def _fact_rows(project: Project) -> Iterator[dict[str, Any]]:
    """The project's facts in Merkle leaf order (by id)."""
    rows = TemporalFact.objects.filter(project=project).order_by("id")
    return _rows_read(rows, (*FACT_VALUE_FIELDS, "revision"), FACT_TIMES)


def _episode_rows(project: Project) -> list[dict[str, Any]]:
    """The project's episodes in Merkle leaf order (by id, after every fact)."""
    rows = Episode.objects.filter(project=project).order_by("id")
    return list(rows.values(*EPISODE_VALUE_FIELDS, "sha256", "revision"))


@dataclass(frozen=True)
class GraphLeaves:
    """The leaves of the graph's Merkle tree (the root integrity verification computes): each
    record's canonical JSON, facts by id then episodes by id, with its (kind, id)."""

    keys: list[tuple[str, str]]
    leaves: list[bytes]
    revision: int


def graph_leaves(*, project: Project) -> GraphLeaves:
    """Every record's Merkle leaf, read in one consistent snapshot (for inclusion proofs)."""
    keys: list[tuple[str, str]] = []
    leaves: list[bytes] = []
    with _snapshot():
        revision = graph_revision_current(project=project)
        for kind, rows, canonical_of in (
            ("fact", _fact_rows(project), fact_canonical_of),
            ("episode", _episode_rows(project), episode_canonical_of),
        ):
            for row in rows:
                keys.append((kind, row["id"]))
                leaves.append(canonical_json(canonical_of(row, project.slug)))
    return GraphLeaves(keys=keys, leaves=leaves, revision=revision)


@takes(IntegrityInput)
def integrity_verify(*, project: Project, params: IntegrityInput) -> IntegrityResult:
    """Verifies the project's graph: every fact's and episode's SHA-256 against its canonical
    JSON, the Merkle root over them (facts by id, then episodes by id), the change log's chain,
    head and (when given) a checkpoint, and every fact, episode and entity against the state
    the log gives it. Names every record or log entry at fault and lists the erasures."""
    checkpoint = None
    if params.checkpoint_size is not None and params.checkpoint_head is not None:
        checkpoint = (params.checkpoint_size, params.checkpoint_head)
    with _snapshot():
        return _integrity_read(project, checkpoint)


def _integrity_read(project: Project, checkpoint: tuple[int, str] | None) -> IntegrityResult:
    chain, revision = _chain_read(project, checkpoint)
    leaves: list[bytes] = []
    mismatches: list[Mismatch] = []
    found: dict[Key, FoundRecord] = {}
    facts = _verify(
        "fact", _fact_rows(project), fact_canonical_of, project.slug, leaves, mismatches, found
    )
    episode_rows = _episode_rows(project)
    episodes = _verify(
        "episode", episode_rows, episode_canonical_of, project.slug, leaves, mismatches, found
    )
    indexes = _episode_indexes(project)
    for row in episode_rows:
        problem = _index_problem(row, *indexes.get(row["id"], ([], [])))
        if problem is not None:
            key = ("episode", row["id"])
            found[key] = found[key]._replace(index_problem=problem)
    entities = _entities_found(project, found)
    return _integrity_result(
        project,
        chain,
        found,
        mismatches,
        counts=(facts, episodes, entities),
        merkle=merkle_root(leaves),
        revision=revision,
    )


def _integrity_result(
    project: Project,
    chain: ChainReport,
    found: dict[Key, FoundRecord],
    mismatches: list[Mismatch],
    *,
    counts: tuple[int, int, int],
    merkle: str,
    revision: int,
) -> IntegrityResult:
    rows, unsealed = records_verify(found, chain.state, revision=revision)
    problems = [
        Problem("mismatch", m.kind, m.id, "its content no longer matches its stored sha256")
        for m in mismatches
    ]
    problems += rows
    if unsealed:
        problems += unsealed_problems(unsealed, _originals(project, unsealed))
    problems += chain.problems
    named = [p.id for p in problems if p.record_type != "change"]
    facts, episodes, entities = counts
    return IntegrityResult(
        project=project.slug,
        verified=not problems,
        facts=facts,
        episodes=episodes,
        entities=entities,
        records=facts + episodes,
        merkle_root=merkle,
        mismatched_ids=list(dict.fromkeys(named)),
        mismatches=mismatches,
        problems=[IntegrityProblem(**p._asdict()) for p in problems],
        chain=ChainState(size=chain.size, head=chain.head),
        checkpoint=(
            CheckpointCheck(
                size=chain.checkpoint[0],
                head=chain.checkpoint[1],
                consistent=bool(chain.checkpoint_consistent),
            )
            if chain.checkpoint
            else None
        ),
        erased=[
            ErasedRecord(
                record_type=e.record_type,
                id=e.record_id,
                erased_at=e.recorded_at,
                sha256=e.erased_sha256,
                reason=e.note,
                seq=e.seq,
            )
            for e in chain.erased
        ],
        checked_at=utcnow(),
    )


# --- summary ----------------------------------------------------------------------------------


def graph_summary(*, project: Project) -> GraphSummary:
    """Counts of the project's graph (facts by status, episodes by category), its revision and
    the integrity result with the Merkle root over every record."""
    integrity = integrity_verify(project=project)
    now = utcnow()
    facts = TemporalFact.objects.filter(project=project).aggregate(
        active=Count("id", filter=valid_at(now)),
        scheduled=Count("id", filter=Q(valid_from__gt=now)),
        superseded=Count("id", filter=Q(valid_until__lte=now, superseded_by__isnull=False)),
        retracted=Count("id", filter=Q(valid_until__lte=now, superseded_by__isnull=True)),
    )
    by_category = dict.fromkeys(EpisodeCategory.values, 0)
    for row in (
        Episode.objects.filter(project=project)
        .values("category")
        .annotate(n=Count("id"))
        .order_by()
    ):
        by_category[row["category"]] = row["n"]
    return GraphSummary(
        project=project.slug,
        revision=graph_revision_current(project=project),
        entities=Entity.objects.filter(project=project).count(),
        facts=FactCounts(total=integrity.facts, **facts),
        episodes=EpisodeCounts(total=integrity.episodes, by_category=by_category),
        merkle_root=integrity.merkle_root,
        verified=integrity.verified,
        mismatched_ids=integrity.mismatched_ids,
    )
