"""Reads on the knowledge graph: rows as their typed outputs, entities with their history and ego
graph, time travel, integrity verification and the list queries of the API.

Every read answers an Output model of ``graph_app.contracts.graph`` (real datetimes; adapters
render them with ``as_json()``). List queries only scope and order: their filters are the
FilterSets of ``graph_app.api.filters``.
"""

from __future__ import annotations

import itertools
import logging
import marshal
import math
import operator
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np
from django.conf import settings
from django.db import connection
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
from graph_app.domain.egograph import Edge, EdgeArrays, EgoWalk, ego_graph
from graph_app.domain.hashing import (
    RecordDigests,
    canonical_json,
    leaf_hash,
    merkle_root_of_leaf_hashes,
    record_digests,
    sha256_hex,
)
from graph_app.domain.records import (
    closure_known,
    entity_canonical,
    episode_canonical,
    fact_as_known_at,
    fact_canonical,
    fact_rows_leaves,
    instant_of,
    sha256_of,
    stored_instant,
    utc_text,
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
from graph_app.domain.supersession import fact_status
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
from graph_app.quarantine_reads import edges_held, episodes_held, facts_held
from memoryproject import sql
from memoryproject.collector import collector_paused
from memoryproject.contracts import takes
from memoryproject.errors import NotFoundError
from memoryproject.models import Project
from memoryproject.reads import read_snapshot
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

logger = logging.getLogger(__name__)

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
    fact = fact_view(fact_find(fact_id=params.fact_id, project_ids=[project.pk]))
    return facts_held(project, [fact])[0]


@takes(EpisodeGetInput)
def episode_get(*, project: Project, params: EpisodeGetInput) -> EpisodeOut:
    episode: EpisodeOut = episode_view(
        episode_find(episode_id=params.episode_id, project_ids=[project.pk])
    )
    return episodes_held(project, [episode])[0]


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
    previews = episodes_held(project, previews)
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
    entity = entity_by_slug(project, params.entity_id)
    if entity is None:
        raise NotFoundError(f"entity_id: no entity '{params.entity_id}'", field="entity_id")
    now = utcnow()
    rows = _entity_fact_rows(entity)
    status = [_row_status(row, now) for row in rows]
    walk, kinds = _ego_in_memory(project, entity, params.max_hops, now)
    # Each list as the positions of its rows: only the page's rows become outputs.
    lists: dict[str, list[int]] = {
        "facts": [
            i for i, state in enumerate(status) if params.include_superseded or state == "active"
        ],
        "history": [i for i, state in enumerate(status) if state in ("superseded", "retracted")],
        "scheduled": [i for i, state in enumerate(status) if state == "scheduled"],
    }
    start, end = params.offset, params.offset + params.limit
    pages: dict[str, list[Any]] = {
        name: facts_held(
            project, [_fact_out(rows[i], project.slug, now, status[i]) for i in items[start:end]]
        )
        for name, items in lists.items()
    }
    totals = {name: len(items) for name, items in lists.items()}
    totals["episodes"], pages["episodes"] = _entity_episodes(project, entity, start, end)
    totals.update(nodes=len(walk.nodes), edges=len(walk.edges))
    return EntityQueryResult(
        entity=entity_view(entity),
        facts=pages["facts"],
        history=pages["history"],
        scheduled=pages["scheduled"],
        episodes=episodes_held(project, [episode_view(e) for e in pages["episodes"]]),
        ego_graph=EgoGraph(
            max_hops=params.max_hops,
            nodes=[
                EgoNode(
                    id=node,
                    kind=entity.kind if node == entity.slug else kinds.get(node, ""),
                    hops=n,
                )
                for node, n in walk.node_page(start, end)
            ],
            edges=edges_held(
                [
                    EgoEdge(
                        fact_id=e.fact_id, source=e.source, predicate=e.predicate, target=e.target
                    )
                    for e in walk.edge_page(start, end)
                ]
            ),
        ),
        totals=totals,
        next_offset=end if any(total > end for total in totals.values()) else None,
    )


def _row_status(row: Mapping[str, Any], now: datetime) -> str:
    """The status at ``now`` of a fact read raw."""
    return fact_status(
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        superseded=row["superseded_by_id"] is not None,
        at=now,
    )


def _fact_out(
    row: Mapping[str, Any], project_slug: str, now: datetime, status: str | None = None
) -> FactOut:
    """A fact read raw (FACT_VALUE_FIELDS and its revision) as its output at ``now``
    (``status``: its status then, when already known)."""
    return FactOut(
        **_fact_fields(row),
        project=project_slug,
        status=_row_status(row, now) if status is None else status,
        sha256=row["sha256"],
        revision=row["revision"],
    )


@cache
def entity_by_slug_sql(columns: str) -> str:
    """An entity of a project by id (its unique (project, slug) index); ``columns``: what to
    read ("1" to ask whether it exists)."""
    return (
        f"SELECT {columns} FROM {sql.table(Entity)} WHERE {sql.column(Entity, 'project')} = %s "
        f"AND {sql.column(Entity, 'slug')} = %s"
    )


def entity_by_slug(project: Project, slug: str) -> Entity | None:
    """The project's entity ``slug``, or None (one statement, not built by the ORM per call)."""
    fields = sql.field_names(Entity)
    return sql.first(
        Entity, fields, entity_by_slug_sql(sql.columns(Entity, fields)), [project.pk, slug]
    )


@cache
def _head_sql() -> str:
    return (
        f"SELECT {sql.columns(GraphRevision, ('revision', 'changes', 'head_hash'))} "
        f"FROM {sql.table(GraphRevision)} WHERE {sql.column(GraphRevision, 'project')} = %s"
    )


def graph_head_row(project: Project) -> tuple[int, int, str]:
    """Where the project's graph stands: (revision, change log size, head hash); (0, 0, the
    genesis hash) before its first write. One row, read on every compile and entity query."""
    rows = sql.fetch(_head_sql(), [project.pk])
    if not rows:
        return 0, 0, GENESIS_HASH
    revision, changes, head_hash = rows[0]
    return int(revision), int(changes), str(head_hash)


def _entity_fact_rows(entity: Entity) -> list[dict[str, Any]]:
    """The facts with the entity as subject or object, by subject, predicate and time, read
    raw (a row per fact, no model instances)."""
    columns = (*FACT_VALUE_FIELDS, "revision")
    rows = [
        *_rows_run(
            _entity_facts_sql("subject", connection.vendor), [entity.pk], columns, FACT_TIMES
        ),
        *_rows_run(
            _entity_facts_sql("object", connection.vendor), [entity.pk] * 2, columns, FACT_TIMES
        ),
    ]
    return sorted(
        rows,
        key=lambda f: (
            f["subject__slug"],
            f["predicate"],
            f["valid_from"],
            f["recorded_at"],
            f["id"],
        ),
    )


_SOME_PK = -7_654_321  # stands for an entity's row id while a statement is made


@cache
def _entity_facts_sql(direction: Literal["subject", "object"], vendor: str) -> str:
    """The statement reading an entity's facts as subject, or as object but not subject (its
    row id as every parameter): made by the ORM once per process, not once per query."""
    # Entities belong to one project, so the entity's row id alone selects its facts; leaving
    # the project out lets each lookup use its foreign-key index (one per direction).
    if direction == "subject":
        rows = TemporalFact.objects.filter(subject_id=_SOME_PK)
    else:
        rows = TemporalFact.objects.filter(object_entity_id=_SOME_PK).exclude(subject_id=_SOME_PK)
    query = rows.order_by().values_list(*FACT_VALUE_FIELDS, "revision").query
    sql, params = query.sql_with_params()
    assert all(p == _SOME_PK for p in params) and vendor == connection.vendor
    return _times_as_text(sql, TemporalFact, FACT_TIMES)


def _entity_episodes(
    project: Project, entity: Entity, start: int, end: int
) -> tuple[int, list[Episode]]:
    """How many episodes mention the entity or are the source of a fact it is the subject of,
    and those from ``start`` to ``end``, latest first: counted, ordered and paged by the
    database (only the page's rows are read)."""
    total = len(sql.fetch(_entity_episodes_sql("ids"), [entity.pk, entity.pk]))
    if start >= end or start >= total:
        return total, []
    page = sql.instances(
        Episode,
        sql.field_names(Episode),
        _entity_episodes_sql("page"),
        [entity.pk, entity.pk, end - start, start],
    )
    for episode in page:
        if episode.project_id == project.pk:
            episode.project = project  # saves reading it again; another is read when shown
    return total, page


@cache
def _entity_episodes_sql(what: Literal["ids", "page"]) -> str:
    """The episodes that link an entity or are the source of a fact it is the subject of (its
    row id as both first parameters): their ids, or a page of them latest first (then the
    page's size and offset)."""
    through = Episode.entities.through
    ids = (
        f"SELECT {sql.column(through, 'episode')} FROM {sql.table(through)} "
        f"WHERE {sql.column(through, 'entity')} = %s UNION "
        f"SELECT {sql.column(TemporalFact, 'source_episode')} FROM {sql.table(TemporalFact)} "
        f"WHERE {sql.column(TemporalFact, 'subject')} = %s "
        f"AND {sql.column(TemporalFact, 'source_episode')} IS NOT NULL"
    )
    if what == "ids":
        return ids
    return (
        f"{sql.select(Episode, sql.field_names(Episode))} "
        f"WHERE {sql.column(Episode, 'id')} IN ({ids}) "
        f"ORDER BY {sql.column(Episode, 'occurred_at')} DESC, {sql.column(Episode, 'id')} "
        "LIMIT %s OFFSET %s"
    )


def _ego_in_memory(
    project: Project, entity: Entity, max_hops: int, now: datetime
) -> tuple[EgoWalk, dict[str, str]]:
    """The entity's ego graph over the edges valid ``now`` (as ``_ego_graph`` answers it),
    walked over the project's edges kept in memory as numpy columns (made again after the
    edges changed), and each entity's kind by id."""
    graph = _edge_graph(project)
    with graph.lock:
        if graph.arrays is None:
            items = {
                edge.fact_id: (since, until, edge)
                for by_fact in graph.edges.values()
                for since, until, edge in by_fact.values()
            }
            graph.arrays = EdgeArrays(graph.by_slug, items.values())
        arrays, kinds = graph.arrays, graph.kinds
    return arrays.walk(entity.slug, max_hops, now.timestamp()), kinds


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


class _Line(NamedTuple):
    """What time travel needs of a fact to decide whether it is visible (times as POSIX
    seconds, INF when absent) and the Merkle leaf hashes of its two forms."""

    id: str
    subject_id: int
    predicate: str
    singular: bool
    valid_from: float
    valid_until: float
    recorded_at: float
    closed_at: float
    leaf_hash: bytes  # its form now
    open_leaf_hash: bytes | None  # its form before its closure was known (closed facts)


def _ts(value: datetime | None, absent: float) -> float:
    return absent if value is None else value.timestamp()


def _line(row: Mapping[str, Any], project_slug: str) -> _Line:
    canonical = fact_canonical_of(row, project_slug)
    open_hash = None
    if row["closed_at"] is not None:
        # As fact_as_known_at reads it before its closure was known.
        seen = {**canonical, "valid_until": None, "closed_at": None, "superseded_by": None}
        open_hash = leaf_hash(canonical_json(seen))
    return _Line(
        row["id"],
        row["subject_id"],
        sys.intern(row["predicate"]),
        bool(row["singular"]),
        _ts(row["valid_from"], -math.inf),
        _ts(row["valid_until"], math.inf),
        _ts(row["recorded_at"], -math.inf),
        # A fact never closed reads as closed since ever: its form never changes.
        _ts(row["closed_at"], -math.inf),
        leaf_hash(canonical_json(canonical)),
        open_hash,
    )


@dataclass
class _Kept:
    """Something a process keeps per project and brings up to date by the rows stamped with a
    later revision (facts are never deleted, only closed or erased, both of which restamp the
    row). ``head`` (the change log's size and hash) tells a graph that went back in time (a
    restored backup, a rolled-back transaction) from one that went on."""

    revision: int = -1
    head: tuple[int, str] = (0, GENESIS_HASH)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def behind(self, project: Project) -> tuple[int, int, tuple[int, str]] | None:
        """None when up to date; else (the revision after which rows changed, -1 for all of
        them; the revision now; the head now). Called under ``lock``."""
        revision, size, head = graph_head_row(project)
        now = (size, head)
        if revision == self.revision and now == self.head:
            return None
        seq, seen = self.head
        went_on = revision > self.revision >= 0 and (
            seq == 0 or GraphChange.objects.filter(project=project, seq=seq, hash=seen).exists()
        )
        return (self.revision if went_on else -1), int(revision), now


@dataclass
class _Timeline(_Kept):
    """A project's facts as time travel reads them (see ``_Kept``)."""

    lines: dict[str, _Line] = field(default_factory=dict)
    ordered: list[_Line] = field(default_factory=list)
    #: The lines' times, kinds and (subject, predicate) groups as columns, in the same order,
    #: so that deciding what is visible is a few vector operations.
    columns: _Columns | None = None
    #: The last instant a fact was recorded or closed: every later one sees the same graph.
    latest: float = -math.inf


#: An edge as the ego graph walks it: valid from, valid until (POSIX seconds) and the edge.
_Item = tuple[float, float, Edge]


@dataclass
class _EdgeGraph(_Kept):
    """A project's edges (facts whose object is an entity) by each entity they touch, and each
    entity's row id and kind by slug (see ``_Kept``)."""

    edges: dict[int, dict[str, _Item]] = field(default_factory=dict)
    # Each edge's two entities (row ids) by fact id: where to remove it from when it changes.
    ends: dict[str, tuple[int, int]] = field(default_factory=dict)
    by_slug: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    # The edges as columns for walking, made from ``edges`` when first needed after a change.
    arrays: EdgeArrays | None = None


#: Projects whose timeline and edges a process keeps (the least recently read is dropped).
_KEPT_PROJECTS = 8
_timelines: dict[int, _Timeline] = {}
_edge_graphs: dict[int, _EdgeGraph] = {}
_timelines_lock = threading.Lock()
_TIMELINE_COLUMNS = (*FACT_VALUE_FIELDS, "subject_id")
_EDGE_COLUMNS_RAW = (
    "id",
    "subject_id",
    "predicate",
    "object_entity_id",
    "valid_from",
    "valid_until",
)

K = TypeVar("K", bound=_Kept)


def _kept(store: dict[int, K], project: Project, make: Callable[[], K]) -> K:
    with _timelines_lock:
        kept = store.pop(project.pk, None) or make()
        store[project.pk] = kept  # the most recently used last
        while len(store) > _KEPT_PROJECTS:
            store.pop(next(iter(store)))
    return kept


def _timeline(project: Project) -> _Timeline:
    """The project's facts as lines, by id, at its current revision: read in full once per
    process, then only the facts changed since (through the (project, revision) index)."""
    timeline = _kept(_timelines, project, _Timeline)
    with timeline.lock:
        behind = timeline.behind(project)
        if behind is None:
            return timeline
        since, revision, head = behind
        rows = TemporalFact.objects.filter(project=project).order_by()
        if since >= 0:
            rows = rows.filter(revision__gt=since)
        else:
            timeline.lines = {}
        for row in _rows_read(rows, _TIMELINE_COLUMNS, FACT_TIMES):
            timeline.lines[row["id"]] = _line(row, project.slug)
        ordered = sorted(timeline.lines.values())
        timeline.columns = _Columns.of(ordered)
        timeline.ordered, timeline.latest = ordered, timeline.columns.latest
        timeline.revision, timeline.head = revision, head
        return timeline


def _edge_graph(project: Project) -> _EdgeGraph:
    """The project's edges at its current revision: read once per process (the edges alone,
    no hashing), then only the edges changed since."""
    graph = _kept(_edge_graphs, project, _EdgeGraph)
    with graph.lock:
        behind = graph.behind(project)
        if behind is None:
            return graph
        since, revision, head = behind
        entities = Entity.objects.filter(project=project).values_list("id", "slug", "kind")
        slugs: dict[int, str] = {}
        graph.kinds = {}
        for pk, slug, kind in entities.order_by():
            slugs[pk], graph.kinds[slug] = slug, kind
        graph.by_slug = {slug: pk for pk, slug in slugs.items()}
        rows = TemporalFact.objects.filter(project=project)
        if since >= 0:
            # Every fact changed since, edge or not: a fact whose object was erased is one no
            # longer, and its edge must go.
            rows = rows.filter(revision__gt=since)
        else:
            rows = rows.filter(object_entity__isnull=False)
            graph.edges, graph.ends = {}, {}
        times = ("valid_from", "valid_until")
        for row in _rows_read(rows.order_by(), _EDGE_COLUMNS_RAW, times):
            fact_id, source, target = row["id"], row["subject_id"], row["object_entity_id"]
            for end in graph.ends.pop(fact_id, ()):
                graph.edges.get(end, {}).pop(fact_id, None)
            if target is None:
                continue
            edge = Edge(fact_id, slugs[source], row["predicate"], slugs[target])
            item = (_ts(row["valid_from"], -math.inf), _ts(row["valid_until"], math.inf), edge)
            graph.edges.setdefault(source, {})[fact_id] = item
            graph.edges.setdefault(target, {})[fact_id] = item
            graph.ends[fact_id] = (source, target)
        graph.arrays = None
        graph.revision, graph.head = revision, head
        return graph


def timeline_forget(project_pk: int | None = None) -> None:
    """Drops the time travel lines kept for a project (all projects: None)."""
    with _timelines_lock:
        _snapshots.clear()
        for store in (_timelines, _edge_graphs):
            if project_pk is None:
                store.clear()
            else:
                store.pop(project_pk, None)


@dataclass(frozen=True)
class _Columns:
    """A timeline's lines as numpy columns (row i is the i-th line by id)."""

    valid_from: np.ndarray
    valid_until: np.ndarray
    recorded_at: np.ndarray
    closed_at: np.ndarray
    singular: np.ndarray
    group: np.ndarray  # one number per (subject, predicate)
    reopens: np.ndarray  # has a form from before its closure was known
    ids: list[str]
    leaves: list[bytes]
    open_leaves: list[bytes | None]

    @classmethod
    def of(cls, lines: list[_Line]) -> _Columns:
        def column(index: int, dtype: type = np.float64) -> np.ndarray:
            return np.fromiter((line[index] for line in lines), dtype=dtype, count=len(lines))

        groups: dict[tuple[int, str], int] = {}
        return cls(
            valid_from=column(4),
            valid_until=column(5),
            recorded_at=column(6),
            closed_at=column(7),
            singular=column(3, np.bool_),
            group=np.fromiter(
                (groups.setdefault((line[1], line[2]), len(groups)) for line in lines),
                dtype=np.int64,
                count=len(lines),
            ),
            reopens=np.fromiter(
                (line[9] is not None for line in lines), dtype=np.bool_, count=len(lines)
            ),
            ids=[line[0] for line in lines],
            leaves=[line[8] for line in lines],
            open_leaves=[line[9] for line in lines],
        )

    @property
    def latest(self) -> float:
        if not len(self.recorded_at):
            return -math.inf
        return float(max(self.recorded_at.max(), self.closed_at.max()))

    def visible(self, at: float, known: float) -> np.ndarray:
        """The rows of the facts valid at ``at`` as known at ``known``, in order: the rules of
        ``facts_visible_at`` (the same filter, then the latest-starting singular fact of each
        subject and predicate wins: by valid_from, recorded_at, then id, i.e. row)."""
        ended = (self.valid_until <= at) & ~(self.closed_at > known)
        rows = np.flatnonzero((self.recorded_at <= known) & (self.valid_from <= at) & ~ended)
        singular = rows[self.singular[rows]]
        if len(singular):
            keys = (singular, self.recorded_at[singular], self.valid_from[singular])
            ranked = singular[np.lexsort((*keys, self.group[singular]))]
            groups = self.group[ranked]
            winners = ranked[np.append(groups[1:] != groups[:-1], True)]
            rows = np.union1d(rows[~self.singular[rows]], winners)
        return rows

    def snapshot(self, at: float, known: float) -> tuple[list[str], list[bytes]]:
        """The ids of the facts visible at ``at`` as known at ``known`` and the leaf hashes
        of their forms as then known (a closure not yet known shows the form before it)."""
        rows = self.visible(at, known)
        picked = rows.tolist()
        if len(picked) > 1:  # one C call per column (itemgetter answers a lone item bare)
            gather = operator.itemgetter(*picked)
            ids, hashes = list(gather(self.ids)), list(gather(self.leaves))
        else:
            ids, hashes = [self.ids[r] for r in picked], [self.leaves[r] for r in picked]
        reopened = np.flatnonzero(self.reopens[rows] & (self.closed_at[rows] > known))
        for position in reopened.tolist():
            hashes[position] = self.open_leaves[picked[position]] or hashes[position]
        return ids, hashes


@takes(TimeTravelInput)
def graph_as_of(*, project: Project, params: TimeTravelInput) -> TimeTravelResult:
    """The facts valid at ``as_of`` as known at transaction time ``known_at`` (default: now),
    with a snapshot hash: the RFC 6962 Merkle root over their canonical forms as then known
    (each fact's ``sha256`` is that of its form as then known). Decided and hashed over the
    project's timeline kept in memory; only the page's facts are read from the database."""
    known_at = params.known_at or utcnow()
    ids, snapshot_hash = _snapshot_of(project, params.as_of, known_at)
    end = params.offset + params.limit
    # By primary key alone (the ids are the project's): the page is read through its index.
    page = ids[params.offset : end]
    rows = TemporalFact.objects.filter(id__in=page).order_by("id")
    facts = [
        _visible_as_known(row, project.slug, known_at).fact
        for row in (_rows_read(rows, FACT_VALUE_FIELDS, FACT_TIMES) if page else ())
    ]
    return TimeTravelResult(
        project=project.slug,
        as_of=params.as_of,
        known_at=known_at,
        count=len(ids),
        snapshot_hash=snapshot_hash,
        facts=facts_held(project, facts),
        next_offset=end if len(ids) > end else None,
    )


class FactsAsKnown(Mapping[str, FactOut]):
    """The facts valid at ``as_of`` as known at ``known_at``, keyed ``fact:<id>``: which
    ones is decided over the project's timeline in memory, and each fact's output (its form as
    then known, hash included) is read from the database the first time it is asked for, so a
    caller that shows a few of them reads a few rows."""

    def __init__(self, project: Project, as_of: datetime, known_at: datetime) -> None:
        ids, self.snapshot_hash = _snapshot_of(project, as_of, known_at)
        self._ids = {f"fact:{fact_id}": fact_id for fact_id in ids}
        self._project_slug, self._known_at = project.slug, known_at
        self._read: dict[str, FactOut] = {}

    def __getitem__(self, key: str) -> FactOut:
        if key not in self._read:
            rows = TemporalFact.objects.filter(pk=self._ids[key])  # KeyError: not visible
            for row in _rows_read(rows, FACT_VALUE_FIELDS, FACT_TIMES):
                self._read[key] = _visible_as_known(row, self._project_slug, self._known_at).fact
        return self._read[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: object) -> bool:
        return key in self._ids


def facts_as_known(*, project: Project, as_of: datetime, known_at: datetime) -> FactsAsKnown:
    """The facts valid at ``as_of`` as known at ``known_at`` (``facts_visible_at``'s answer)
    as a mapping from ``fact:<id>`` to each one's output, read when first asked for."""
    return FactsAsKnown(project, as_of, known_at)


_SNAPSHOTS_KEPT = 16
_snapshots: dict[tuple[Any, ...], tuple[list[str], str]] = {}


def _snapshot_of(project: Project, as_of: datetime, known_at: datetime) -> tuple[list[str], str]:
    """The ids of the facts visible at (``as_of``, ``known_at``) and their snapshot hash;
    the last few are kept by graph state, so paging through one answer decides it once."""
    timeline = _timeline(project)
    known = known_at.timestamp()
    key = (project.pk, timeline.revision, timeline.head, as_of, min(known, timeline.latest))
    with _timelines_lock:
        kept = _snapshots.get(key)
    if kept is not None:
        return kept
    ids: list[str] = []
    hashes: list[bytes] = []
    if timeline.columns is not None:
        ids, hashes = timeline.columns.snapshot(as_of.timestamp(), known)
    kept = (ids, merkle_root_of_leaf_hashes(hashes).hex())
    with _timelines_lock:
        while len(_snapshots) >= _SNAPSHOTS_KEPT:
            _snapshots.pop(next(iter(_snapshots)))
        _snapshots[key] = kept
    return kept


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
#: Seconds a full verification waits for its fact worker before reading the facts itself.
_WORKER_TIMEOUT = 600


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
    return _rows_run(_times_as_text(sql, rows.model, times), params, columns, times)


def _rows_run(
    sql: str, params: Sequence[Any], columns: tuple[str, ...], times: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    """The rows of ``sql`` as ``_rows_read`` answers them."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(_CHUNK):
            for values in chunk:
                row = dict(zip(columns, values, strict=True))
                for name in times:
                    row[name] = stored_instant(row[name])
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


def _change_entries(project: Project, from_seq: int = 0) -> Iterator[ChangeEntry]:
    """The project's change log in seq order (from ``from_seq`` on), read by one raw statement
    through the (project, seq) index: verification reads every entry, and the ORM's per-row
    conversions would cost more than hashing them."""
    table = GraphChange._meta.db_table
    columns = ", ".join(f'"{table}"."{name}"' for name in CHANGE_FIELDS)
    sql = (
        f'SELECT {columns} FROM "{table}" WHERE "{table}"."project_id" = %s '
        f'AND "{table}"."seq" >= %s ORDER BY 1, "id"'
    )
    with connection.chunked_cursor() as cursor:
        cursor.execute(_times_as_text(sql, GraphChange, ("recorded_at",)), [project.pk, from_seq])
        # The entries one write appends share its time: each stored text is read once.
        stored, at = None, None
        while rows := cursor.fetchmany(_CHUNK):
            for row in rows:
                if row[8] != stored:
                    stored, at = row[8], utc_text(row[8])
                yield ChangeEntry._make((*row[:8], at, row[9], row[10]))


def _chain_read(
    project: Project, checkpoint: tuple[int, str] | None, *, since: bool = False
) -> tuple[ChainReport, int]:
    """Replays the project's change log: the chain, its head and the checkpoint; answers it
    with the project's revision. ``since``: only from the checkpoint's entry on, chained from
    that entry's link (the entries before it are not read)."""
    watch = checkpoint[0] if checkpoint else None
    report = None
    if since and checkpoint is not None and checkpoint[0] > 0:
        entries = _change_entries(project, from_seq=checkpoint[0])
        first = next(entries, None)
        if first is not None and first.seq == checkpoint[0]:
            # Chained from where the checkpointed entry links to: it is verified itself.
            report = chain_verify(
                itertools.chain([first], entries),
                project=project.slug,
                watch=watch,
                start=(first.seq - 1, first.prev_hash),
            )
        # Without its entry the checkpoint cannot anchor anything: the whole log is read,
        # so that its problems are named as a full verification names them.
    if report is None:
        report = chain_verify(_change_entries(project), project=project.slug, watch=watch)
    revision, size, head_hash = _head_row(project).first() or (0, 0, GENESIS_HASH)
    head_verify(report, size=int(size), head=str(head_hash))
    if checkpoint is not None:
        checkpoint_verify(report, size=checkpoint[0], head=checkpoint[1])
    return report, int(revision)


def _verify(
    kind: Literal["fact", "episode"],
    digests: RecordDigests,
    leaf_hashes: list[bytes],
    mismatches: list[Mismatch],
    found: dict[Key, FoundRecord],
) -> int:
    """For each record's digests: appends its Merkle leaf hash to ``leaf_hashes``, a Mismatch
    when the stored hash differs from the computed one, and what was found to ``found``;
    answers how many records there were."""
    ids, stored_hashes, revisions, computed_hashes, leaves = digests
    for record_id, stored, revision, computed in zip(
        ids, stored_hashes, revisions, computed_hashes, strict=True
    ):
        stored_matches = computed == stored
        if not stored_matches:
            mismatches.append(Mismatch(kind=kind, id=record_id, stored=stored, computed=computed))
        found[(kind, record_id)] = FoundRecord(computed, stored_matches, revision)
    leaf_hashes.extend(leaves)
    return len(ids)


def _episode_leaves(
    rows: Iterable[Mapping[str, Any]], project_slug: str
) -> Iterator[tuple[str, str, int, bytes]]:
    """(id, stored hash, revision, canonical JSON) of each episode row."""
    for row in rows:
        data = canonical_json(episode_canonical_of(row, project_slug))
        yield row["id"], row["sha256"], row["revision"], data


def _index_problems(
    project: Project,
    episode_rows: list[dict[str, Any]],
    found: dict[Key, FoundRecord],
    ids: list[str] | None = None,
) -> None:
    """Notes in ``found`` each episode whose file rows or entity links are not the ones it
    recorded (``ids``: only those episodes' index rows are read)."""
    indexes = _episode_indexes(project, ids)
    for row in episode_rows:
        problem = _index_problem(row, *indexes.get(row["id"], ([], [])))
        if problem is not None:
            key = ("episode", row["id"])
            found[key] = found[key]._replace(index_problem=problem)


def _episode_indexes(
    project: Project, ids: list[str] | None = None
) -> dict[str, tuple[list[str], list[str]]]:
    """Each episode's file paths and linked entity ids, as stored, sorted (``ids``: only
    those episodes')."""
    indexes: dict[str, tuple[list[str], list[str]]] = {}
    if ids is not None and not ids:
        return indexes
    scope = Q(episode__project=project) if ids is None else Q(episode_id__in=ids)
    files = EpisodeFile.objects.filter(scope).values_list("episode_id", "path")
    for episode_id, path in files.order_by().iterator(chunk_size=_CHUNK):
        indexes.setdefault(episode_id, ([], []))[0].append(path)
    links = Episode.entities.through.objects.filter(scope)
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


def _entities_found(
    project: Project, found: dict[Key, FoundRecord], slugs: list[str] | None = None
) -> int:
    entities = Entity.objects.filter(project=project)
    if slugs is not None:
        entities = entities.filter(slug__in=slugs)
    rows = entities.order_by().values(*ENTITY_VALUE_FIELDS)
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


def _fact_leaves(
    project: Project, ids: list[str] | None = None
) -> Iterator[tuple[str, str, int, bytes]]:
    """(id, stored hash, revision, canonical JSON) of the project's facts in Merkle leaf order
    (by id); ``ids``: only those. Read raw, instants straight into their canonical text:
    verification reads every fact, and per-row conversions would cost more than hashing."""
    sql, params = _fact_statement(project, ids)
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(_CHUNK):
            yield from fact_rows_leaves(chunk, project.slug)


def _fact_statement(project: Project, ids: list[str] | None = None) -> tuple[str, Sequence[Any]]:
    """The statement ``_fact_leaves`` reads the facts with (rows for ``fact_rows_leaves``)."""
    rows = TemporalFact.objects.filter(project=project).order_by("id")
    if ids is not None:
        rows = rows.filter(id__in=ids)
    sql, params = rows.values_list(*FACT_VALUE_FIELDS, "revision").query.sql_with_params()
    return _times_as_text(sql, TemporalFact, FACT_TIMES), params


def _episode_rows(project: Project, ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The project's episodes in Merkle leaf order (by id, after every fact); ``ids``: only
    those."""
    rows = Episode.objects.filter(project=project).order_by("id")
    if ids is not None:
        rows = rows.filter(id__in=ids)
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
    with read_snapshot(), collector_paused():
        revision = graph_revision_current(project=project)
        for kind, records in (
            ("fact", _fact_leaves(project)),
            ("episode", _episode_leaves(_episode_rows(project), project.slug)),
        ):
            for record_id, _, _, data in records:
                keys.append((kind, record_id))
                leaves.append(data)
    return GraphLeaves(keys=keys, leaves=leaves, revision=revision)


@takes(IntegrityInput)
def integrity_verify(*, project: Project, params: IntegrityInput) -> IntegrityResult:
    """``integrity_unwitnessed``, then held to the witness outside the database
    (graph_app.witness_check): not verified unless the witness agrees, "unanchored" without
    one."""
    from graph_app.witness_check import integrity_witnessed

    return integrity_witnessed(project, integrity_unwitnessed(project=project, params=params))


@takes(IntegrityInput)
def integrity_unwitnessed(*, project: Project, params: IntegrityInput) -> IntegrityResult:
    """Verifies the project's graph: every fact's and episode's SHA-256 against its canonical
    JSON, the Merkle root over them (facts by id, then episodes by id), the change log's chain,
    head and (when given) a checkpoint, and every fact, episode and entity against the state
    the log gives it. Names every record or log entry at fault and lists the erasures."""
    checkpoint = None
    if params.checkpoint_size is not None and params.checkpoint_head is not None:
        checkpoint = (params.checkpoint_size, params.checkpoint_head)
    with read_snapshot() as own, collector_paused():
        if params.since_checkpoint and checkpoint is not None:
            return _integrity_since(project, checkpoint)
        # A worker reads the snapshot on its own connection: only when it holds nothing
        # uncommitted, that is when verification opened the transaction itself.
        return _integrity_read(project, checkpoint, worker=own)


def _integrity_since(project: Project, checkpoint: tuple[int, str]) -> IntegrityResult:
    """Verification of what changed since ``checkpoint``: the log's entries from it on and
    the records they touched, each read by its key (rows in proportion to the changes)."""
    chain, revision = _chain_read(project, checkpoint, since=True)
    touched: dict[str, list[str]] = {}
    for kind, record_id in chain.state:
        touched.setdefault(kind, []).append(record_id)
    leaves: list[bytes] = []
    mismatches: list[Mismatch] = []
    found: dict[Key, FoundRecord] = {}
    fact_ids, episode_ids = touched.get("fact", []), touched.get("episode", [])
    facts = episodes = 0
    for start in range(0, len(fact_ids), _CHUNK):
        rows = _fact_leaves(project, fact_ids[start : start + _CHUNK])
        facts += _verify("fact", record_digests(rows), leaves, mismatches, found)
    episode_rows: list[dict[str, Any]] = []
    for start in range(0, len(episode_ids), _CHUNK):
        episode_rows += _episode_rows(project, episode_ids[start : start + _CHUNK])
    episodes = _verify(
        "episode",
        record_digests(_episode_leaves(episode_rows, project.slug)),
        leaves,
        mismatches,
        found,
    )
    _index_problems(project, episode_rows, found, [r["id"] for r in episode_rows])
    slugs = touched.get("entity", [])
    entities = sum(
        _entities_found(project, found, slugs[start : start + _CHUNK])
        for start in range(0, len(slugs), _CHUNK)
    )
    result = _integrity_result(
        project,
        chain,
        found,
        mismatches,
        counts=(facts, episodes, entities),
        merkle="",
        revision=revision,
    )
    return result.model_copy(update={"scope": "since_checkpoint"})


def _integrity_read(
    project: Project, checkpoint: tuple[int, str] | None, *, worker: bool
) -> IntegrityResult:
    """Full verification. ``worker``: a large project's facts may be read and hashed by a
    second process (graph_app.integrity_worker) meanwhile."""
    apart = _fact_worker_start(project) if worker else None
    try:
        chain, revision = _chain_read(project, checkpoint)
        episode_rows = _episode_rows(project)
        episode_digests = record_digests(_episode_leaves(episode_rows, project.slug))
        fact_digests = _fact_worker_digests(*apart) if apart is not None else None
    finally:
        if apart is not None and apart[0].returncode is None:
            apart[0].kill()
            apart[0].communicate()
    if fact_digests is None:
        fact_digests = record_digests(_fact_leaves(project))
    leaf_hashes: list[bytes] = []
    mismatches: list[Mismatch] = []
    found: dict[Key, FoundRecord] = {}
    facts = _verify("fact", fact_digests, leaf_hashes, mismatches, found)
    episodes = _verify("episode", episode_digests, leaf_hashes, mismatches, found)
    _index_problems(project, episode_rows, found)
    entities = _entities_found(project, found)
    return _integrity_result(
        project,
        chain,
        found,
        mismatches,
        counts=(facts, episodes, entities),
        merkle=merkle_root_of_leaf_hashes(leaf_hashes).hex(),
        revision=revision,
    )


def _fact_worker_start(project: Project) -> tuple[subprocess.Popen[bytes], list[Any]] | None:
    """Starts a worker reading and hashing the project's facts, and answers it with the
    graph head this snapshot reads: the worker reads in this transaction's snapshot on
    PostgreSQL (exported), in a snapshot of its own on SQLite, which ``_fact_worker_digests``
    holds to this one by that head. None when the
    project is below INTEGRITY_WORKER_MIN_CHANGES, the database is one a second connection
    cannot share (in memory; not SQLite or PostgreSQL) or the worker cannot start.
    Verification then reads them itself."""
    minimum = settings.INTEGRITY_WORKER_MIN_CHANGES
    if minimum <= 0 or connection.vendor not in ("sqlite", "postgresql"):
        return None
    head = list(_head_row(project).first() or [])
    if not head or head[1] < minimum:  # (revision, changes, head hash)
        return None
    sql, params = _fact_statement(project)
    head_sql, head_params = _head_row(project).query.sql_with_params()
    job: dict[str, Any] = {
        "vendor": connection.vendor,
        "sql": sql,
        "params": list(params),
        "head_sql": head_sql,
        "head_params": list(head_params),
        "project": project.slug,
    }
    if connection.vendor == "sqlite":
        if connection.is_in_memory_db():  # type: ignore[attr-defined]  # SQLite's wrapper
            return None
        job["database"] = os.path.abspath(connection.settings_dict["NAME"])
    else:
        with connection.cursor() as cursor:  # exported for the transaction's lifetime
            cursor.execute("SELECT pg_export_snapshot()")
            job["snapshot"] = cursor.fetchone()[0]
        job["database"] = {
            name: value
            for name, value in connection.get_connection_params().items()
            if type(value) in (str, int)
        }
    path = os.pathsep.join(filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")]))
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", "graph_app.integrity_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
    except OSError as error:
        logger.warning("integrity worker not started (%s): facts read in process", error)
        return None
    stdin, worker.stdin = worker.stdin, None  # closed here: communicate() only reads
    assert stdin is not None
    try:
        with stdin:
            stdin.write(marshal.dumps(job))
    except OSError:
        pass  # it ended already: its exit status and stderr say why
    return worker, head


def _head_row(project: Project) -> QuerySet[Any]:
    """The project's graph head: (revision, changes, head hash). Every write through the
    services moves it, so two reads that find the same head read the same graph."""
    return GraphRevision.objects.filter(project=project).values_list(
        "revision", "changes", "head_hash"
    )


def _fact_worker_digests(worker: subprocess.Popen[bytes], here: list[Any]) -> RecordDigests | None:
    """The worker's digests of the facts, when it read them at the graph head this
    verification reads; None (logged) if it failed or read another head (a write committed
    between the two snapshots): verification then reads them itself."""
    try:
        out, err = worker.communicate(timeout=_WORKER_TIMEOUT)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.communicate()
        logger.warning("integrity worker ran over %s s: facts read in process", _WORKER_TIMEOUT)
        return None
    if worker.returncode == 0:
        try:
            head, *columns = marshal.loads(out)
            digests = RecordDigests(*columns)
        except (EOFError, ValueError, TypeError):
            pass
        else:
            if list(head or []) != here:
                logger.info(
                    "integrity worker %s read the graph at head %s, not %s (a write came "
                    "between): facts read in process",
                    worker.pid,
                    head,
                    here,
                )
                return None
            logger.debug("integrity worker %s read %d facts", worker.pid, len(digests.ids))
            return digests
    detail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    logger.warning(
        "integrity worker failed (exit %s: %s): facts read in process",
        worker.returncode,
        detail[0],
    )
    return None


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
                erased_at=instant_of(e.recorded_at),
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
