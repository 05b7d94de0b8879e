"""Spreading activation over the entity graph.

A query rarely names everything that matters: asking about ``order_repository`` invariants
should also bring in the ``payment_ledger`` facts it depends on. The entities the query names
and those of the best matches are seeds holding their strength; activation flows along edges
(facts whose object is an entity, followed in both directions) for up to ``hops`` steps, losing
``decay`` per step. A node keeps the strongest activation that reached it (max, not sum), so a
hub with many neighbours does not swamp the ranking. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter

DEFAULT_HOPS = 2
DEFAULT_DECAY = 0.5


def spread_activation(
    seeds: Mapping[str, float],
    neighbours: Callable[[str], Iterable[str]],
    *,
    hops: int = DEFAULT_HOPS,
    decay: float = DEFAULT_DECAY,
    min_activation: float = 0.01,
    max_frontier: int | None = None,
) -> dict[str, float]:
    """Activation of every node reached from ``seeds`` within ``hops`` steps.

    Seeds keep their own value; a node ``k`` steps away from a seed of value ``a`` receives
    ``a * decay**k`` (the best path wins). Values below ``min_activation`` stop spreading;
    with ``max_frontier``, only that many of the most activated new nodes spread further at
    each hop (ties by name), which bounds the work on dense graphs.
    """
    if not 0 <= decay <= 1:
        raise ValueError("decay must be within [0, 1]")
    activation: dict[str, float] = {node: value for node, value in seeds.items() if value > 0}
    frontier = dict(activation)
    for _ in range(max(hops, 0)):
        reached: dict[str, float] = {}
        for node, value in frontier.items():
            passed = value * decay
            if passed < min_activation:
                continue
            for neighbour in neighbours(node):
                if passed > reached.get(neighbour, 0.0):
                    reached[neighbour] = passed
        frontier = {}
        for node, value in reached.items():
            if value > activation.get(node, 0.0):
                activation[node] = value
                frontier[node] = value
        if max_frontier is not None and len(frontier) > max_frontier:
            frontier = dict(strongest(frontier.items(), max_frontier))
        if not frontier:
            break
    return activation


def strongest(
    pairs: Iterable[tuple[str, float]], limit: int | None = None
) -> list[tuple[str, float]]:
    """(node, value) pairs by value descending, ties by node (the ``limit`` first of them):
    two stable sorts on C-level keys (the same order as sorting on ``(-value, node)``, without
    a Python call per pair). With ``limit``, only the pairs whose value reaches the
    ``limit``-th largest are sorted by node: most of a hop's nodes fall short of it."""
    ordered = list(pairs)
    if limit is not None and len(ordered) > limit:
        values = sorted(map(itemgetter(1), ordered), reverse=True)
        least = values[limit - 1]
        ordered = [pair for pair in ordered if pair[1] >= least]
    ordered.sort(key=itemgetter(0))
    ordered.sort(key=itemgetter(1), reverse=True)
    return ordered if limit is None else ordered[:limit]
