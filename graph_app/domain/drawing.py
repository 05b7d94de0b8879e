"""Geometry for the memory browser's drawings, computed on the server so pages need no script:
the 2-hop neighbourhood as a radial graph (the entity in the middle, each hop on its own ring)
and the history timeline's bars on a shared time scale (valid time and recorded time).

Plain numbers in, plain numbers out: the template only writes them into SVG.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

LABEL_CHARS = 22


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (the full text goes in a title)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


# --- neighbourhood graph ----------------------------------------------------------------------


@dataclass(frozen=True)
class PlacedNode:
    id: str
    kind: str
    hops: int
    x: float
    y: float
    label: str
    label_x: float
    label_y: float


@dataclass(frozen=True)
class PlacedEdge:
    fact_id: str
    source: str
    predicate: str
    target: str
    x1: float
    y1: float
    x2: float
    y2: float
    label_x: float
    label_y: float
    label: str


@dataclass(frozen=True)
class GraphDrawing:
    size: int
    node_radius: int
    nodes: list[PlacedNode]
    edges: list[PlacedEdge]
    hidden_nodes: int
    hidden_edges: int


def _ring(
    ids: Sequence[str], radius: float, centre: float, offset: float = 0.0
) -> dict[str, tuple[float, float]]:
    """Evenly spaced points on a circle, in the order given, starting at the top."""
    points = {}
    for index, node in enumerate(ids):
        angle = offset + 2 * math.pi * index / max(len(ids), 1) - math.pi / 2
        points[node] = (centre + radius * math.cos(angle), centre + radius * math.sin(angle))
    return points


def _trim(x1: float, y1: float, x2: float, y2: float, by: float) -> tuple[float, ...]:
    """The segment shortened by ``by`` at both ends, so lines stop at the nodes' edges."""
    length = math.hypot(x2 - x1, y2 - y1)
    if length <= 2 * by:
        return x1, y1, x2, y2
    dx, dy = (x2 - x1) / length * by, (y2 - y1) / length * by
    return x1 + dx, y1 + dy, x2 - dx, y2 - dy


def _outward(x: float, y: float, centre: float, by: float) -> tuple[float, float]:
    """The point ``by`` away from (x, y), away from the centre (below it for the centre), where
    a node's label crosses none of its edges to the middle."""
    dx, dy = x - centre, y - centre
    length = math.hypot(dx, dy)
    if length == 0:
        return x, y + by
    return x + dx / length * by, y + dy / length * by


def _second_ring_order(
    first: Sequence[str], second: Sequence[str], edges: Iterable[tuple[str, str, str, str]]
) -> list[str]:
    """The second ring ordered by the position of a first-ring neighbour, so that each node sits
    near the node that reaches it and few lines cross."""
    position = {node: index for index, node in enumerate(first)}
    parent: dict[str, int] = {}
    for _, source, _, target in edges:
        for near, far in ((source, target), (target, source)):
            if near in position and far not in position:
                parent[far] = min(parent.get(far, len(first)), position[near])
    return sorted(second, key=lambda node: (parent.get(node, len(first)), node))


def radial_layout(
    center: str,
    nodes: Sequence[tuple[str, str, int]],
    edges: Sequence[tuple[str, str, str, str]],
    *,
    size: int = 560,
    max_nodes: int = 40,
    node_radius: int = 18,
) -> GraphDrawing:
    """Places ``nodes`` (id, kind, hops) around ``center``: hop 1 on the inner ring, hop 2 on
    the outer one. ``edges`` are (fact id, source, predicate, target). At most ``max_nodes`` are
    drawn (nearest first, then by id); the rest are counted, with the edges they would carry."""
    kept = sorted(nodes, key=lambda n: (n[2], n[0]))[:max_nodes]
    kinds = {node: kind for node, kind, _ in kept}
    hops = {node: hop for node, _, hop in kept}
    first = [node for node, _, hop in kept if hop == 1]
    second = [node for node, _, hop in kept if hop >= 2]
    drawn = [e for e in edges if e[1] in hops and e[3] in hops]
    centre = size / 2
    points = {center: (centre, centre)}
    points.update(_ring(first, size * 0.22, centre))
    points.update(
        _ring(_second_ring_order(first, second, drawn), size * 0.41, centre, math.pi / 24)
    )
    placed_nodes = []
    for node in sorted(hops, key=lambda n: (hops[n], n)):
        x, y = points[node]
        label_x, label_y = _outward(x, y, centre, node_radius + 13)
        placed_nodes.append(
            PlacedNode(
                id=node,
                kind=kinds.get(node, ""),
                hops=hops[node],
                x=round(x, 1),
                y=round(y, 1),
                label=short_label(node),
                label_x=round(label_x, 1),
                label_y=round(label_y + 4, 1),  # 4: about half a line, to centre the text
            )
        )
    placed_edges = []
    for fact_id, source, predicate, target in drawn:
        (sx, sy), (tx, ty) = points[source], points[target]
        x1, y1, x2, y2 = _trim(sx, sy, tx, ty, node_radius + 3)
        placed_edges.append(
            PlacedEdge(
                fact_id=fact_id,
                source=source,
                predicate=predicate,
                target=target,
                x1=round(x1, 1),
                y1=round(y1, 1),
                x2=round(x2, 1),
                y2=round(y2, 1),
                label_x=round((sx + tx) / 2, 1),
                label_y=round((sy + ty) / 2 - 4, 1),
                label=short_label(predicate, 18),
            )
        )
    return GraphDrawing(
        size=size,
        node_radius=node_radius,
        nodes=placed_nodes,
        edges=placed_edges,
        hidden_nodes=len(nodes) - len(kept),
        hidden_edges=len(edges) - len(drawn),
    )


# --- timeline ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """A time interval on the scale: from ``x`` for ``width``; ``open`` when it has no end."""

    x: float
    width: float
    open: bool


@dataclass(frozen=True)
class TimeScale:
    start: datetime
    end: datetime
    width: float

    def x(self, moment: datetime) -> float:
        span = (self.end - self.start).total_seconds()
        if span <= 0:
            return 0.0
        share = (moment - self.start).total_seconds() / span
        return round(min(max(share, 0.0), 1.0) * self.width, 1)

    def bar(self, start: datetime, end: datetime | None) -> Bar:
        """The interval [start, end) on the scale (an open one runs to the scale's end); at
        least 2 units wide so an instant still shows."""
        left = self.x(start)
        right = self.x(end) if end is not None else self.width
        return Bar(x=left, width=round(max(right - left, 2.0), 1), open=end is None)


def time_scale(moments: Iterable[datetime | None], *, width: float = 240) -> TimeScale:
    """A scale covering every given moment (None ignored), padded by 2% on each side."""
    known = [m for m in moments if m is not None]
    if not known:
        raise ValueError("a time scale needs at least one moment")
    start, end = min(known), max(known)
    pad = (end - start) * 0.02
    return TimeScale(start=start - pad, end=end + pad, width=width)
