"""Reads of one entity: the entity query (its facts valid now, its history and scheduled facts,
the episodes about it and its ego graph, paged) and its neighbourhood at any valid and
transaction time. Its facts and episodes are read through statements made once per process;
its ego graph now is walked over the project's edges kept in memory (graph_app.graph_caches).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from functools import cache
from typing import Any, Literal

from django.db import connection
from django.db.models import Q

from graph_app.contracts.entities import (
    EgoEdge,
    EgoGraph,
    EgoNode,
    EntityQueryInput,
    EntityQueryResult,
)
from graph_app.contracts.facts import FactOut
from graph_app.domain.egograph import Edge, EdgeArrays, EgoWalk, ego_graph
from graph_app.domain.supersession import Status, fact_status
from graph_app.graph_caches import edge_graph
from graph_app.models import Entity, Episode, TemporalFact
from graph_app.quarantine_reads import edges_held, episodes_held, facts_held
from graph_app.raw_rows import rows_run, times_as_text
from graph_app.record_canonical import FACT_TIMES, FACT_VALUE_FIELDS, fact_fields
from graph_app.record_views import entity_view, episode_view
from graph_app.visibility import fact_visible, fact_visible_now
from memoryproject import sql
from memoryproject.contracts import takes
from memoryproject.errors import NotFoundError
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

EGO_CHUNK = 5_000


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


def _row_status(row: Mapping[str, Any], now: datetime) -> Status:
    """The status at ``now`` of a fact read raw."""
    return fact_status(
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        superseded=row["superseded_by_id"] is not None,
        at=now,
    )


def _fact_out(
    row: Mapping[str, Any], project_slug: str, now: datetime, status: Status | None = None
) -> FactOut:
    """A fact read raw (FACT_VALUE_FIELDS and its revision) as its output at ``now``
    (``status``: its status then, when already known)."""
    return FactOut(
        **fact_fields(row),
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


def _entity_fact_rows(entity: Entity) -> list[dict[str, Any]]:
    """The facts with the entity as subject or object, by subject, predicate and time, read
    raw (a row per fact, no model instances)."""
    columns = (*FACT_VALUE_FIELDS, "revision")
    rows = [
        *rows_run(
            _entity_facts_sql("subject", connection.vendor), [entity.pk], columns, FACT_TIMES
        ),
        *rows_run(
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
    return times_as_text(sql, TemporalFact, FACT_TIMES)


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
    graph = edge_graph(project)
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
    return _ego_graph(entity, max_hops, fact_visible(as_of or now, known_at or now))


def _ego_graph(entity: Entity, max_hops: int, edges: Q | None = None) -> EgoGraph:
    """Every entity within ``max_hops`` of ``entity`` over the ``edges`` (default: the active
    ones), either direction."""
    # Walk by entity row id so every hop is answered from the foreign-key indexes.
    ids = {entity.slug: entity.pk}
    kinds = {entity.slug: entity.kind}
    edge_filter = fact_visible_now() if edges is None else edges
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
