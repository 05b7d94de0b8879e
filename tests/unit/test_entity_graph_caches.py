"""The entity graph's links and items kept per node across writes (``MemoryStore._links``,
``_items_made``): whatever is written between two rankings, the next one follows the graph as
the tables hold it, exactly as an index that never kept them."""

from hypothesis import given, settings
from hypothesis import strategies as st

from graph_app.domain.memory_doc import INF, MemoryDoc
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.memory_store import Visibility
from graph_app.domain.stored_columns import entries

NAMES = ["order_repo", "Payment_Ledger", "refund_queue", "audit_trail", "mailer"]
NODES = [name.lower() for name in NAMES] + ["mailer_v2"]
QUERY = "order_repo payment_ledger refund_queue audit_trail invariants"

names = st.sampled_from(NAMES)


@st.composite
def docs(draw: st.DrawFn) -> MemoryDoc:
    """A fact (a subject, an edge to another entity or an object value naming one, maybe
    closed) or an episode (entities it lists and names it mentions), under a few keys so that
    documents are rewritten in place."""
    closed = draw(st.booleans())
    words = tuple(draw(st.lists(st.sampled_from(["invariants", "uses", "drains"]), max_size=3)))
    if draw(st.booleans()):
        subject = draw(names)
        link = draw(st.sampled_from(["none", "edge", "ref"]))
        other = draw(st.sampled_from([*NAMES, "mailer_v2"]))
        return MemoryDoc(
            f"fact:{draw(st.integers(0, 5))}",
            "fact",
            (subject.lower(), *words),
            subject=subject,
            edge=(subject, other) if link == "edge" else None,
            object_ref=other.lower() if link == "ref" else None,
            valid_until=10.0 if closed else INF,
            closed_at=10.0 if closed else INF,
            salience=draw(st.sampled_from([0.5, 1.0])),
        )
    return MemoryDoc(
        f"episode:{draw(st.integers(0, 3))}",
        "episode",
        ("note", *words),
        entities=tuple(draw(st.lists(names, max_size=2, unique=True))),
        mentions=tuple(n.lower() for n in draw(st.lists(names, max_size=2, unique=True))),
    )


def links_now(index: MemoryIndex, node: str) -> tuple[tuple[str, int], ...]:
    """A node's links read from the tables as they are."""
    out = [*entries(index._edges_of, node), *entries(index._refs, node)]
    out += [(ref, s) for ref, s in entries(index._out_refs, node) if index.is_entity(ref)]
    return tuple(out)


def index_of(written: list[MemoryDoc]) -> MemoryIndex:
    index = MemoryIndex()
    for doc in written:
        index.upsert(doc)
    return index


@settings(max_examples=150, deadline=None)
@given(written=st.lists(docs(), min_size=1, max_size=14))
def test_kept_links_and_items_are_the_tables_after_every_write(written):
    kept = MemoryIndex()
    for done, doc in enumerate(written, 1):
        kept.upsert(doc)
        # Every node read after each write: each is kept, and must be dropped when it changes.
        visible = kept.shown(kept.masks(Visibility())[0])
        for node in NODES:
            assert kept._links(node) == links_now(kept, node), node
            assert kept._items_made(node) == tuple(kept._items_about(node)), node
            kept.neighbours_seen(visible)(node)
            kept.items_seen(node, visible)
        warmed = index_of(written[:done])
        assert warmed.graph_warm() == len(warmed._node_links) == len(warmed._node_items)
        for visibility in (Visibility(), Visibility(include_superseded=True), Visibility()):
            # Ranked as by an index given the same writes that never read the graph before,
            # and as by one that made every node's at once (as a build from the rows ends).
            expected = index_of(written[:done]).rank(QUERY, visibility)
            assert kept.rank(QUERY, visibility) == expected
            assert warmed.rank(QUERY, visibility) == expected
            # What each node shows at this visibility, kept from an earlier one and written
            # since, is what the tables hold now.
            shown = kept.shown(kept.masks(visibility)[0])
            for node in NODES:
                links = [other for other, slot in links_now(kept, node) if shown[slot]]
                assert kept.neighbours_seen(shown)(node) == list(dict.fromkeys(links)), node
                items = [item for item in kept._items_about(node) if shown[item[0]]]
                assert kept.items_seen(node, shown) == items, node
