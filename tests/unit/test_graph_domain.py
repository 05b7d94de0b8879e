"""Pure graph rules: supersession placement and the ego-graph walk (no database)."""

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from graph_app.domain.egograph import Edge, EdgeArrays, ego_graph
from graph_app.domain.records import fact_as_known_at, fact_canonical
from graph_app.domain.supersession import ChainFact, place_fact

JAN = datetime(2026, 1, 10, tzinfo=UTC)
FEB = datetime(2026, 2, 1, tzinfo=UTC)
APR = datetime(2026, 4, 20, tzinfo=UTC)
JUN = datetime(2026, 6, 1, tzinfo=UTC)


def fact(id, value, start, end=None):
    return ChainFact(id, value, None, start, end, start)


def test_first_fact_becomes_active():
    assert (
        place_fact([], object_value="A", object_entity=None, valid_from=JAN, singular=True).outcome
        == "active"
    )


def test_new_value_supersedes_active():
    placement = place_fact(
        [fact("f1", "A", JAN)], object_value="B", object_entity=None, valid_from=APR, singular=True
    )
    assert (placement.outcome, placement.close_id) == ("active", "f1")


def test_same_value_reasserted_later_is_unchanged():
    placement = place_fact(
        [fact("f1", "A", JAN)], object_value="A", object_entity=None, valid_from=JUN, singular=True
    )
    assert (placement.outcome, placement.existing_id) == ("unchanged", "f1")


def test_earlier_value_is_history_closed_at_next_start():
    chain = [fact("f1", "A", JAN, APR), fact("f2", "B", APR)]
    placement = place_fact(
        chain, object_value="C", object_entity=None, valid_from=FEB, singular=True
    )
    assert placement.outcome == "history"
    assert (placement.successor_id, placement.valid_until) == ("f2", APR)


def test_non_singular_adds_values_but_not_duplicates():
    chain = [fact("f1", "redis", JAN)]
    assert (
        place_fact(
            chain, object_value="postgres", object_entity=None, valid_from=FEB, singular=False
        ).outcome
        == "active"
    )
    assert (
        place_fact(
            chain, object_value="redis", object_entity=None, valid_from=FEB, singular=False
        ).outcome
        == "unchanged"
    )


def test_known_at_before_closure_reads_open():
    canonical = fact_canonical(
        id="f1",
        project="p",
        subject="s",
        predicate="p",
        object_value="A",
        object_entity=None,
        singular=True,
        confidence=1.0,
        valid_from=JAN,
        valid_until=APR,
        recorded_at=JAN,
        closed_at=APR,
        superseded_by="f2",
        source_episode=None,
    )
    assert fact_as_known_at(canonical, closed_at=APR, known_at=FEB)["valid_until"] is None
    assert fact_as_known_at(canonical, closed_at=APR, known_at=JUN)["valid_until"] is not None


def test_ego_graph_walks_both_directions_up_to_radius():
    edges = [
        Edge("e1", "order_repository", "depends_on", "payment_ledger"),
        Edge("e2", "checkout", "calls", "order_repository"),
        Edge("e3", "cart", "calls", "checkout"),
    ]

    def touching(nodes):
        return [e for e in edges if e.source in nodes or e.target in nodes]

    two = ego_graph("payment_ledger", 2, touching)
    assert two.distances == {"payment_ledger": 0, "order_repository": 1, "checkout": 2}
    assert {e.fact_id for e in two.edges} == {"e1", "e2"}
    assert ego_graph("payment_ledger", 0, touching).distances == {"payment_ledger": 0}


_NODES = [f"n{i}" for i in range(8)]
_TIMED_EDGE = st.tuples(
    st.sampled_from(_NODES),
    st.sampled_from(_NODES),
    st.sampled_from([0.0, 10.0, float("-inf")]),  # valid from
    st.sampled_from([5.0, 20.0, float("inf")]),  # valid until
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_TIMED_EDGE, max_size=24),
    st.sampled_from([*_NODES, "lonely"]),
    st.integers(min_value=0, max_value=3),
    st.sampled_from([-1.0, 3.0, 12.0, 30.0]),
)
def test_edge_arrays_walk_the_same_ego_graph_as_the_breadth_first_walk(edges, center, hops, at):
    items = [
        (since, until, Edge(f"f{i:02d}", a, "calls", b))
        for i, (a, b, since, until) in enumerate(edges)
    ]

    def touching(nodes):
        return [
            e for since, until, e in items if since <= at < until and {e.source, e.target} & nodes
        ]

    expected = ego_graph(center, hops, touching)
    walk = EdgeArrays(_NODES, items).walk(center, hops, at)
    nodes = sorted(expected.distances.items(), key=lambda kv: (kv[1], kv[0]))
    assert walk.node_page(0, 100) == nodes
    assert walk.edge_page(0, 100) == expected.edges
    # Pages are slices of the same order.
    assert walk.node_page(1, 3) == nodes[1:3]
    assert walk.edge_page(2, 5) == expected.edges[2:5]
