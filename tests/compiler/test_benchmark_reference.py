"""The in-memory reference compiler the benchmark compares ours to: it must do the same job
(find, spread two hops, pack under the budget) for its timings to mean anything."""

from __future__ import annotations

from benchmarks.memory.reference import RefDoc, ReferenceIndex
from graph_app.domain.tokenize import tokenize
from memoryproject.tokens import count_tokens


def _fact(key: str, subject: str, predicate: str, value: str, *, obj: str = "", live=True):
    text = f"{subject} {predicate} {value}"
    return RefDoc(
        key=key,
        tokens=tuple(tokenize(text)),
        entities=(subject,),
        edge=(subject, obj) if obj else None,
        line=f"[FACT:{key}] {subject} --({predicate})--> {value}",
        live=live,
    )


DOCS = [
    _fact("old", "order_service", "uses_token_format", "opaque_session_token", live=False),
    _fact("new", "order_service", "uses_token_format", "JWT_RS256"),
    _fact("edge", "order_service", "depends_on", "payment_ledger", obj="payment_ledger"),
    _fact("far", "payment_ledger", "stores_data_in", "postgres_16"),
    _fact("other", "catalog_cache", "log_level", "DEBUG"),
    RefDoc(
        key="episode:1",
        tokens=tuple(tokenize("Invariant: order_service never writes twice")),
        entities=("order_service",),
        edge=None,
        line="[INVARIANT:ep_1] Invariant: order_service never writes twice",
        live=True,
    ),
]


def test_reference_finds_the_current_fact_and_never_the_superseded_one():
    index = ReferenceIndex(DOCS, count=count_tokens)
    result = index.compile("order_service token format", 800)
    assert "new" in result.keys
    assert "old" not in result.keys
    assert "JWT_RS256" in result.markdown
    assert "opaque_session_token" not in result.markdown


def test_reference_reaches_a_neighbour_through_an_edge_the_query_did_not_name():
    index = ReferenceIndex(DOCS, count=count_tokens)
    result = index.compile("order_service token format", 800)
    assert "far" in result.keys  # payment_ledger, one edge from order_service
    assert "other" not in result.keys  # unrelated and unconnected


def test_reference_bundle_fits_the_budget_as_the_product_counts_it():
    index = ReferenceIndex(DOCS, count=count_tokens)
    for budget in (20, 40, 800):
        result = index.compile("order_service token format", budget)
        assert result.token_count == count_tokens(result.markdown)
        assert result.token_count <= budget
    assert len(index.compile("order_service token format", 20).keys) < len(
        index.compile("order_service token format", 800).keys
    )
