"""The memory browser's drawings: the neighbourhood's radial layout and the timeline's scale."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from graph_app.domain.drawing import radial_layout, short_label, time_scale

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _distance(node, size):
    return math.hypot(node.x - size / 2, node.y - size / 2)


def test_entity_sits_in_the_middle_and_each_hop_on_its_own_ring():
    drawing = radial_layout(
        "a",
        [("a", "service", 0), ("b", "service", 1), ("c", "db", 1), ("d", "file", 2)],
        [("f1", "a", "calls", "b"), ("f2", "a", "calls", "c"), ("f3", "b", "reads", "d")],
        size=500,
    )
    by_id = {n.id: n for n in drawing.nodes}
    assert (by_id["a"].x, by_id["a"].y) == (250, 250)
    assert _distance(by_id["b"], 500) == pytest.approx(_distance(by_id["c"], 500), abs=0.2)
    assert _distance(by_id["d"], 500) > _distance(by_id["b"], 500) + 50
    assert {e.fact_id for e in drawing.edges} == {"f1", "f2", "f3"}
    assert drawing.hidden_nodes == drawing.hidden_edges == 0


def test_edges_stop_at_the_nodes_instead_of_their_centres():
    drawing = radial_layout(
        "a", [("a", "", 0), ("b", "", 1)], [("f1", "a", "calls", "b")], size=400, node_radius=18
    )
    edge = drawing.edges[0]
    length = math.hypot(edge.x2 - edge.x1, edge.y2 - edge.y1)
    assert length == pytest.approx(400 * 0.22 - 2 * 21, abs=0.3)


def test_a_crowded_neighbourhood_is_cut_nearest_first_and_counted():
    nodes = [("hub", "", 0)] + [(f"n{i:03d}", "", 1) for i in range(30)]
    nodes += [(f"m{i:03d}", "", 2) for i in range(30)]
    edges = [(f"f{i}", "hub", "calls", f"n{i:03d}") for i in range(30)]
    edges += [(f"g{i}", f"n{i:03d}", "calls", f"m{i:03d}") for i in range(30)]
    drawing = radial_layout("hub", nodes, edges, max_nodes=40)
    assert len(drawing.nodes) == 40
    assert {n.hops for n in drawing.nodes} == {0, 1, 2}
    assert sum(n.hops == 1 for n in drawing.nodes) == 30
    assert drawing.hidden_nodes == 21
    assert drawing.hidden_edges == 21
    assert all(e.source in {n.id for n in drawing.nodes} for e in drawing.edges)


def test_long_names_are_shortened_for_the_picture():
    assert short_label("x" * 30) == "x" * 21 + "\u2026"
    assert short_label("short") == "short"


def test_time_scale_places_intervals_and_open_ends():
    scale = time_scale([T0, T0 + timedelta(days=100)], width=200)
    closed = scale.bar(T0, T0 + timedelta(days=50))
    assert 0 < closed.x < 10 and closed.width == pytest.approx(96, abs=1) and not closed.open
    open_bar = scale.bar(T0 + timedelta(days=50), None)
    assert open_bar.open and open_bar.x + open_bar.width == pytest.approx(200)
    instant = scale.bar(T0, T0)
    assert instant.width == 2.0
    assert scale.x(T0 - timedelta(days=999)) == 0 and scale.x(T0 + timedelta(days=999)) == 200


def test_time_scale_needs_a_moment():
    with pytest.raises(ValueError, match="at least one moment"):
        time_scale([None])
