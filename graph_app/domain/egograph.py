"""The k-hop ego graph of an entity: breadth-first over edges in both directions.

Edges are fetched hop by hop through a callback, so the caller only loads the neighbourhood it
needs instead of the whole graph; or, for a graph kept in memory, walked over numpy columns
(``EdgeArrays``). Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from graph_app.domain.visibility import valid_at


@dataclass(frozen=True)
class Edge:
    fact_id: str
    source: str
    predicate: str
    target: str


@dataclass(frozen=True)
class EgoGraph:
    center: str
    distances: dict[str, int]  # node -> hops from the center
    edges: list[Edge]


def ego_graph(
    center: str, max_hops: int, edges_touching: Callable[[set[str]], Iterable[Edge]]
) -> EgoGraph:
    """Nodes within ``max_hops`` of ``center`` and the edges among them found on the way.

    ``edges_touching(nodes)`` answers every edge with a source or target in ``nodes``.
    """
    distances = {center: 0}
    edges: dict[str, Edge] = {}
    frontier = {center}
    for hop in range(1, max_hops + 1):
        if not frontier:
            break
        reached: set[str] = set()
        for edge in edges_touching(frontier):
            edges[edge.fact_id] = edge
            for node in (edge.source, edge.target):
                if node not in distances:
                    distances[node] = hop
                    reached.add(node)
        frontier = reached
    inside = list(edges.values())
    inside.sort(key=lambda e: (distances[e.source] + distances[e.target], e.fact_id))
    return EgoGraph(center=center, distances=distances, edges=inside)


@dataclass(frozen=True)
class EgoWalk:
    """An ego graph as positions into an ``EdgeArrays``: its nodes by hops then id and its
    edges by the hops of their ends then fact id. Pages are made into values on demand, so a
    large neighbourhood costs array work, not an object per node and edge."""

    arrays: EdgeArrays
    nodes: np.ndarray  # node positions, in order
    hops: np.ndarray  # hops of each node position (-1: not reached)
    edges: np.ndarray  # edge positions, in order

    def node_page(self, start: int, end: int) -> list[tuple[str, int]]:
        names = self.arrays.names
        return [(names[i], int(self.hops[i])) for i in self.nodes[start:end].tolist()]

    def edge_page(self, start: int, end: int) -> list[Edge]:
        edges = self.arrays.edges
        return [edges[i] for i in self.edges[start:end].tolist()]


class EdgeArrays:
    """A graph's edges as numpy columns, each with the time it is valid in: walking two hops
    of a hub reached by thousands of edges is a few vector operations.

    ``items`` are (valid from, valid until, edge) with POSIX seconds (open ends infinite);
    ``names`` every node, edges or not.
    """

    def __init__(self, names: Iterable[str], items: Iterable[tuple[float, float, Edge]]) -> None:
        named = set(names)
        self.edges: list[Edge] = []
        since: list[float] = []
        until: list[float] = []
        for start, end, edge in sorted(items, key=lambda item: item[2].fact_id):
            since.append(start)
            until.append(end)
            self.edges.append(edge)
        listed = sorted(named.union(*((e.source, e.target) for e in self.edges)))
        # Nodes by id: a node's position is its rank, so sorting positions sorts ids.
        self.names = listed
        self.position = {name: i for i, name in enumerate(listed)}
        # Edges by fact id, likewise.
        self.source = np.fromiter(
            (self.position[e.source] for e in self.edges), dtype=np.int64, count=len(self.edges)
        )
        self.target = np.fromiter(
            (self.position[e.target] for e in self.edges), dtype=np.int64, count=len(self.edges)
        )
        self.since = np.asarray(since, dtype=np.float64)
        self.until = np.asarray(until, dtype=np.float64)
        # Each node's edges (either end) as one sorted column with offsets per node.
        ends = np.concatenate([self.source, self.target])
        touching = np.tile(np.arange(len(self.edges), dtype=np.int64), 2)
        order = np.argsort(ends, kind="stable")
        self.touching = touching[order]
        counts = np.bincount(ends, minlength=len(listed))
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def _touching(self, nodes: np.ndarray) -> np.ndarray:
        starts, stops = self.offsets[nodes], self.offsets[nodes + 1]
        lengths = stops - starts
        total = int(lengths.sum())
        if not total:
            return np.zeros(0, dtype=np.int64)
        # The ranges [start, stop) of every node, concatenated, without a Python loop.
        shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        return self.touching[np.arange(total, dtype=np.int64) + shift]

    def walk(self, center: str, max_hops: int, at: float) -> EgoWalk:
        """The ego graph of ``center`` over the edges valid at ``at``, as ``ego_graph``
        answers it."""
        hops = np.full(len(self.names), -1, dtype=np.int64)
        first = self.position.get(center)
        if first is None:
            # A node without edges: the graph is itself alone.
            lone = EdgeArrays([center], [])
            return EgoWalk(lone, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), _NONE)
        hops[first] = 0
        frontier = np.array([first], dtype=np.int64)
        # Boolean columns rather than np.unique: marking is linear and keeps id order.
        seen = np.zeros(len(self.edges), dtype=bool)
        for hop in range(1, max_hops + 1):
            if not len(frontier):
                break
            edges = self._touching(frontier)
            edges = edges[valid_at(self.since[edges], self.until[edges], at)]
            seen[edges] = True
            ends = np.concatenate([self.source[edges], self.target[edges]])
            hops[ends[hops[ends] < 0]] = hop
            frontier = np.flatnonzero(hops == hop)
        inside = np.flatnonzero(seen)
        # ``inside`` is in fact id order: a stable sort by hops keeps it within equal hops.
        depth = hops[self.source[inside]] + hops[self.target[inside]]
        edges = inside[np.argsort(depth, kind="stable")]
        reached = np.flatnonzero(hops >= 0)  # in id order
        nodes = reached[np.argsort(hops[reached], kind="stable")]
        return EgoWalk(self, nodes, hops, edges)


_NONE = np.zeros(0, dtype=np.int64)
