"""The k-hop ego graph of an entity: breadth-first over edges in both directions.

Edges are fetched hop by hop through a callback, so the caller only loads the neighbourhood it
needs instead of the whole graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


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
