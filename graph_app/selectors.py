"""Reads on the knowledge graph: rows as their typed outputs, entities with their history and ego
graph, time travel, integrity verification and the list queries of the API.

Every read answers an Output model of ``graph_app.contracts.graph`` (real datetimes; adapters
render them with ``as_json()``). List queries only scope and order: their filters are the
FilterSets of ``graph_app.api.filters``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from django.db.models import Count, Model, Q, QuerySet

from graph_app.contracts.graph import (
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
    FactCounts,
    FactGetInput,
    FactOut,
    GraphSummary,
    IntegrityInput,
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
    episode_canonical,
    fact_as_known_at,
    fact_canonical,
)
from graph_app.domain.render import cited_id
from graph_app.models import Entity, Episode, EpisodeCategory, GraphRevision, TemporalFact
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
    """The canonical form of a FACT_VALUE_FIELDS row."""
    return fact_canonical(project=project_slug, **_fact_fields(row))


def episode_canonical_of(row: Mapping[str, Any], project_slug: str) -> dict[str, Any]:
    """The canonical form of an EPISODE_VALUE_FIELDS row."""
    values = {name: row[name] for name in EPISODE_VALUE_FIELDS}
    # A JSON column nulled behind the application's back still hashes (and so mismatches).
    values["files_touched"] = values["files_touched"] or []
    values["entities_mentioned"] = values["entities_mentioned"] or []
    values["metadata"] = values["metadata"] or {}
    return episode_canonical(project=project_slug, **values)


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
    return EntityQueryResult(
        entity=entity_view(entity),
        facts=own if params.include_superseded else [f for f in own if f.status == "active"],
        history=[f for f in own if f.status in ("superseded", "retracted")],
        scheduled=[f for f in own if f.status == "scheduled"],
        episodes=[episode_view(e) for e in _entity_episodes(entity)],
        ego_graph=_ego_graph(entity, params.max_hops),
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


def _ego_graph(entity: Entity, max_hops: int) -> EgoGraph:
    """Every entity within ``max_hops`` of ``entity`` over active edges, either direction."""
    # Walk by entity row id so every hop is answered from the foreign-key indexes.
    ids = {entity.slug: entity.pk}
    kinds = {entity.slug: entity.kind}
    active_edges = TemporalFact.objects.filter(valid_now(), object_entity__isnull=False).order_by()

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


def facts_visible_at(*, project: Project, as_of: datetime, known_at: datetime) -> list[VisibleFact]:
    """The facts valid at ``as_of`` as they were known at ``known_at``, sorted by id.

    Transaction time first: a fact recorded after ``known_at`` is invisible, and a closure
    recorded after ``known_at`` had not happened yet (the fact reads as open). Then valid time:
    ``valid_from <= as_of < valid_until``. History rows are never rewritten, so a backdated fact
    may overlap an older closed one; for a singular predicate the fact starting latest wins.
    """
    rows = (
        TemporalFact.objects.filter(
            project=project, recorded_at__lte=known_at, valid_from__lte=as_of
        )
        .filter(Q(valid_until__isnull=True) | Q(valid_until__gt=as_of) | Q(closed_at__gt=known_at))
        .values(*FACT_VALUE_FIELDS)
    )
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
    result.sort(key=lambda f: f.fact.id)
    return result


@takes(TimeTravelInput)
def graph_as_of(*, project: Project, params: TimeTravelInput) -> TimeTravelResult:
    """The facts valid at ``as_of`` as known at transaction time ``known_at`` (default: now),
    with a snapshot hash: the RFC 6962 Merkle root over their canonical forms as then known
    (each fact's ``sha256`` is that of its form as then known)."""
    known_at = params.known_at or utcnow()
    facts = facts_visible_at(project=project, as_of=params.as_of, known_at=known_at)
    return TimeTravelResult(
        project=project.slug,
        as_of=params.as_of,
        known_at=known_at,
        count=len(facts),
        snapshot_hash=merkle_root([f.leaf for f in facts]),
        facts=[f.fact for f in facts],
    )


# --- integrity --------------------------------------------------------------------------------


def _verify(
    kind: Literal["fact", "episode"],
    rows: Iterable[Mapping[str, Any]],
    canonical_of: Callable[[Mapping[str, Any], str], dict[str, Any]],
    project_slug: str,
    leaves: list[bytes],
    mismatches: list[Mismatch],
) -> int:
    """Appends each row's canonical JSON to ``leaves`` and a Mismatch for each row whose stored
    hash differs from it; answers how many rows there were."""
    count = 0
    for row in rows:
        data = canonical_json(canonical_of(row, project_slug))
        computed = sha256_hex(data)
        if computed != row["sha256"]:
            mismatches.append(
                Mismatch(kind=kind, id=row["id"], stored=row["sha256"], computed=computed)
            )
        leaves.append(data)
        count += 1
    return count


@takes(IntegrityInput)
def integrity_verify(*, project: Project, params: IntegrityInput) -> IntegrityResult:
    """Recomputes every fact's and episode's SHA-256 from its canonical JSON and the Merkle
    root over all of them (facts by id, then episodes by id); names every record whose stored
    hash no longer matches its content."""
    leaves: list[bytes] = []
    mismatches: list[Mismatch] = []
    fact_rows = TemporalFact.objects.filter(project=project).order_by("id")
    episode_rows = Episode.objects.filter(project=project).order_by("id")
    facts = _verify(
        "fact",
        fact_rows.values(*FACT_VALUE_FIELDS),
        fact_canonical_of,
        project.slug,
        leaves,
        mismatches,
    )
    episodes = _verify(
        "episode",
        episode_rows.values(*EPISODE_VALUE_FIELDS, "sha256"),
        episode_canonical_of,
        project.slug,
        leaves,
        mismatches,
    )
    return IntegrityResult(
        project=project.slug,
        verified=not mismatches,
        facts=facts,
        episodes=episodes,
        records=facts + episodes,
        merkle_root=merkle_root(leaves),
        mismatched_ids=[m.id for m in mismatches],
        mismatches=mismatches,
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
