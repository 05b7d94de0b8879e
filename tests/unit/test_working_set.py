"""What a serving process keeps of what its compiles make stays bounded, however many different
queries it answers (graph_app.domain.working_set), and a cache emptied by its bound gives the
same answers as one that kept everything."""

from __future__ import annotations

import numpy as np

from graph_app import text_cache
from graph_app.domain import render
from graph_app.domain.bm25 import BM25Index
from graph_app.domain.index_columns import StringTable
from graph_app.domain.postings import Postings
from graph_app.domain.stored_columns import StoredStrings
from graph_app.domain.working_set import STRINGS_KEPT, TERMS_KEPT, WORKING_SET, grown, kept


def test_a_kept_cache_never_holds_more_than_its_limit_and_keeps_the_newest_entry():
    cache: dict[int, str] = {}
    for n in range(10):
        assert kept(cache, n, f"v{n}", 4) == f"v{n}"
        assert len(cache) <= 4 and cache[n] == f"v{n}"
    assert cache == {8: "v8", 9: "v9"}  # emptied when full, then filled again


def test_short_strings_kept_once_decoded_stop_at_their_bound_and_still_read_right():
    table = StringTable()
    texts = [f"s{n}" for n in range(STRINGS_KEPT + 500)]
    table.ids(texts)
    columns = table.columns()
    strings = StoredStrings(columns["strings.text"], columns["strings.ends"])
    numbers = list(range(len(texts)))
    assert strings.many(numbers) == texts
    assert len(strings._kept) <= STRINGS_KEPT
    assert [strings[n] for n in reversed(numbers)] == texts[::-1]
    assert len(strings._kept) <= STRINGS_KEPT


def test_term_scores_kept_between_queries_stop_at_their_bound_and_stay_the_same_floats():
    index, fresh = BM25Index(), BM25Index()
    terms = [f"term{n}" for n in range(TERMS_KEPT + 200)]
    for n, term in enumerate(terms):
        tokens = [term, "shared", terms[n // 2]]
        index.upsert(f"d{n}", tokens)
        fresh.upsert(f"d{n}", tokens)
    for term in terms:
        index.contribution(term, None)
        assert len(index._contributions) <= TERMS_KEPT
    for term in (terms[0], terms[-1], "shared"):
        again, made = index.contribution(term, None), fresh.contribution(term, None)
        assert again is not None and made is not None
        assert np.array_equal(again[0], made[0]) and again[1].tolist() == made[1].tolist()


def test_the_caches_of_texts_a_compile_counts_and_splits_hold_at_most_the_working_set():
    for cache in (
        text_cache.counted_tokens,
        text_cache.sentence_terms,
        render.sentences,
    ):
        assert cache.cache_info().maxsize == WORKING_SET
    text_cache.text_caches_clear()
    for n in range(WORKING_SET + 10):
        text_cache.sentence_terms(f"sentence number {n} about payments")
    assert text_cache.sentence_terms.cache_info().currsize == WORKING_SET
    assert text_cache.sentence_terms("sentence number 0 about payments") == (
        "sentenc",
        "number",
        "0",
        "payment",
    )


def test_runs_merged_with_their_writes_are_kept_for_at_most_the_terms_bound_and_read_right():
    terms = [f"t{n:05d}" for n in range(TERMS_KEPT + 100)]
    ends = np.arange(2, 2 * len(terms) + 1, 2, dtype=np.int64)
    slots = np.tile(np.array([0, 1], dtype=np.int32), len(terms))
    postings = Postings(terms, ends, slots, np.ones(2 * len(terms), dtype=np.int32))
    for term in terms:
        postings.add(term, 5, 2)
    for term in terms + terms[:3]:
        run = postings.run(term)
        assert run is not None
        assert run[0].tolist() == [0, 1, 5] and run[1].tolist() == [1, 1, 2]
        assert len(postings._arrays) <= TERMS_KEPT


def test_per_slot_arrays_grow_by_an_eighth_not_double():
    assert grown(110_000, 110_001) == 123_750
    assert grown(10, 11) == 74  # at least 64 more
    assert grown(100, 500) == 500  # at least what is needed
