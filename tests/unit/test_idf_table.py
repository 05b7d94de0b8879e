"""BM25's IDF worked out per term when a query asks for it, not for the whole vocabulary after
every write: the same floats as the whole table, including the floor that a term held by more
than half of the documents gets, and the same scores as an index built from scratch."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from graph_app.domain.bm25 import EPSILON, IDENTIFIER_BOOST, BM25Index, okapi_idf

# Few words over many short documents: most of them end up in more than half of the documents,
# whose raw IDF is negative, so the floor decides their weight.
words = st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"])
documents = st.lists(st.lists(words, min_size=1, max_size=6), min_size=1, max_size=20)
# A write: a document's number (a new one or one written before) and its words.
writes = st.lists(st.tuples(st.integers(0, 24), st.lists(words, max_size=6)), max_size=12)


def _frequencies(docs: dict[str, list[str]]) -> dict[str, int]:
    held: dict[str, int] = {}
    for tokens in docs.values():
        for term in set(tokens):
            held[term] = held.get(term, 0) + 1
    return dict(sorted(held.items()))


def _written(index: BM25Index, docs: dict[str, list[str]], key: str, tokens: list[str]) -> None:
    tokens = tokens or ["iota"]  # a document holds a word at least
    index.upsert(key, tokens)
    docs[key] = tokens


@settings(max_examples=80, deadline=None)
@given(first=documents, changes=writes, query=st.lists(words | st.just("absent"), max_size=10))
def test_each_term_weighs_what_the_whole_table_gives_after_any_writes(first, changes, query):
    index, docs = BM25Index(), {}
    for n, tokens in enumerate(first):
        _written(index, docs, f"d{n}", tokens)
    for n, tokens in changes:
        index.scores(query)  # a query between writes: the table it made must not outlive them
        _written(index, docs, f"d{n}", tokens)
        whole = okapi_idf(len(docs), _frequencies(docs), EPSILON)
        # Asked in any order, one term at a time: the floats of the whole table, bit for bit.
        for term in [*reversed(sorted(whole)), "absent"]:
            assert index.idf(term) == whole.get(term, 0.0), term
        assert dict(index.idf_table()) == whole


@settings(max_examples=80, deadline=None)
@given(first=documents, changes=writes, query=st.lists(words, min_size=1, max_size=10))
def test_an_index_kept_up_to_date_scores_exactly_as_one_built_from_scratch(first, changes, query):
    index, docs = BM25Index(), {}
    for n, tokens in enumerate(first):
        _written(index, docs, f"d{n}", tokens)
    for n, tokens in changes:
        index.scores(query)
        _written(index, docs, f"d{n}", tokens)
    fresh = BM25Index()
    for key, tokens in docs.items():
        fresh.upsert(key, tokens)
    assert index.scores(query) == fresh.scores(query)  # equal floats, not close
    kept, built = index.dense_scores(query, b=0.3), fresh.dense_scores(query, b=0.3)
    assert [kept[index.slot(k)] for k in docs] == [built[fresh.slot(k)] for k in docs]


def test_a_term_in_most_documents_gets_the_floor_and_a_rare_one_its_own_idf():
    index = BM25Index()
    for n in range(9):
        index.upsert(f"d{n}", ["common", f"rare{n}"] if n else ["common", "rare0", "once"])
    raw_common = math.log(9 - 9 + 0.5) - math.log(9 + 0.5)
    assert raw_common < 0
    frequencies = {"common": 9, "once": 1, **{f"rare{n}": 1 for n in range(9)}}
    whole = okapi_idf(9, dict(sorted(frequencies.items())), EPSILON)
    assert index.idf("once") == math.log(9 - 1 + 0.5) - math.log(1 + 0.5) == whole["once"]
    assert index.idf("common") == whole["common"] > 0  # the floor, not its negative raw IDF
    assert index.scores(["common"])["d3"] > 0


@settings(max_examples=80, deadline=None)
@given(
    first=documents,
    query=st.lists(words | st.just("absent"), max_size=10),
    boosted=st.lists(words | st.just("absent"), max_size=3),
)
def test_scores_are_the_floats_of_adding_each_term_in_turn(first, query, boosted):
    """A query's scores are its terms' contributions added slot by slot in the query's order
    (a repeated term again), then the boosted identifiers' in sorted order: the same floats,
    however the sum is carried out."""
    index = BM25Index()
    for n, tokens in enumerate(first):
        index.upsert(f"d{n}", tokens)
    expected = [0.0] * len(first)
    for term in query:
        found = index.contribution(term, None)
        if found is not None:
            for slot, score in zip(found[0].tolist(), found[1].tolist(), strict=True):
                expected[slot] += score
    for term in sorted(set(boosted)):
        for slot in range(len(first)):
            if term in first[slot]:
                expected[slot] += IDENTIFIER_BOOST * index.smooth_idf(term)
    assert index.dense_scores(query, boost_identifiers=boosted).tolist() == expected
