"""What a process keeps of each project's graph between reads, for the few projects read last:
its facts as a timeline (graph_app.timeline_columns) and its edges by entity, each brought up to
date by the rows stamped with a later revision; and the last few time travel answers, by graph
state.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from graph_app.domain.egograph import Edge, EdgeArrays
from graph_app.domain.visibility import posix_seconds
from graph_app.graph_head import graph_head, graph_log_holds
from graph_app.models import Entity, TemporalFact
from graph_app.raw_rows import rows_read
from graph_app.record_canonical import FACT_TIMES, FACT_VALUE_FIELDS
from graph_app.timeline_columns import FactLine, TimelineColumns, fact_line
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.domain.hashing import merkle_root_of_leaf_hashes
from memoryproject.models import Project


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
        current = graph_head(project)
        now = (current.changes, current.head_hash)
        if current.revision == self.revision and now == self.head:
            return None
        went_on = current.revision > self.revision >= 0 and graph_log_holds(project, *self.head)
        return (self.revision if went_on else -1), current.revision, now


@dataclass
class _Timeline(_Kept):
    """A project's facts as time travel reads them (see ``_Kept``)."""

    lines: dict[str, FactLine] = field(default_factory=dict)
    ordered: list[FactLine] = field(default_factory=list)
    #: The lines' times, kinds and (subject, predicate) groups as columns, in the same order,
    #: so that deciding what is visible is a few vector operations.
    columns: TimelineColumns | None = None
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


def _current(
    store: dict[int, K],
    project: Project,
    make: Callable[[], K],
    catch_up: Callable[[K, Project, int], None],
) -> K:
    """The project's kept ``make()`` at its current revision: when behind, ``catch_up`` reads
    into it the rows changed after the revision it is given (-1: all of them)."""
    kept = _kept(store, project, make)
    with kept.lock:
        behind = kept.behind(project)
        if behind is not None:
            since, revision, head = behind
            catch_up(kept, project, since)
            kept.revision, kept.head = revision, head
        return kept


def _timeline(project: Project) -> _Timeline:
    """The project's facts as lines, by id, at its current revision: read in full once per
    process, then only the facts changed since (through the (project, revision) index)."""
    return _current(_timelines, project, _Timeline, _timeline_catch_up)


def _timeline_catch_up(timeline: _Timeline, project: Project, since: int) -> None:
    rows = TemporalFact.objects.filter(project=project).order_by()
    if since >= 0:
        rows = rows.filter(revision__gt=since)
    else:
        timeline.lines = {}
    for row in rows_read(rows, _TIMELINE_COLUMNS, FACT_TIMES):
        timeline.lines[row["id"]] = fact_line(row, project.slug)
    ordered = sorted(timeline.lines.values())
    timeline.columns = TimelineColumns.of(ordered)
    timeline.ordered, timeline.latest = ordered, timeline.columns.latest


def edge_graph(project: Project) -> _EdgeGraph:
    """The project's edges at its current revision: read once per process (the edges alone,
    no hashing), then only the edges changed since."""
    return _current(_edge_graphs, project, _EdgeGraph, _edges_catch_up)


def _edges_catch_up(graph: _EdgeGraph, project: Project, since: int) -> None:
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
    for row in rows_read(rows.order_by(), _EDGE_COLUMNS_RAW, times):
        fact_id, source, target = row["id"], row["subject_id"], row["object_entity_id"]
        for end in graph.ends.pop(fact_id, ()):
            graph.edges.get(end, {}).pop(fact_id, None)
        if target is None:
            continue
        edge = Edge(fact_id, slugs[source], row["predicate"], slugs[target])
        item = (
            posix_seconds(row["valid_from"], -math.inf),
            posix_seconds(row["valid_until"], math.inf),
            edge,
        )
        graph.edges.setdefault(source, {})[fact_id] = item
        graph.edges.setdefault(target, {})[fact_id] = item
        graph.ends[fact_id] = (source, target)
    graph.arrays = None


def timeline_forget(project_pk: int | None = None) -> None:
    """Drops the time travel lines kept for a project (all projects: None)."""
    with _timelines_lock:
        _snapshots.clear()
        for store in (_timelines, _edge_graphs):
            if project_pk is None:
                store.clear()
            else:
                store.pop(project_pk, None)


_SNAPSHOTS_KEPT = 16


_snapshots: dict[tuple[Any, ...], tuple[list[str], str]] = {}


def snapshot_of(project: Project, as_of: datetime, known_at: datetime) -> tuple[list[str], str]:
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
