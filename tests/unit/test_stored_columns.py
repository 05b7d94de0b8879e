"""Columns read in place (graph_app/domain/stored_columns.py, postings.py): a restored index's
strings, per-slot lists, tables and postings read back exactly what was written, take later
changes as the dicts and lists they stand for would, and refuse columns that do not fit."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_app.domain import stored_columns
from graph_app.domain.index_columns import StringTable
from graph_app.domain.postings import Postings
from graph_app.domain.stored_columns import (
    Runs,
    SlotList,
    StoredStrings,
    StoredTable,
    entries,
    holds,
)

TEXTS = ["fact:1", "", "naïve café", "\ud800 lone surrogate", "nul\x00inside", "日本語", "fact:1x"]


def _stored(texts: list[str]) -> tuple[StoredStrings, np.ndarray]:
    table = StringTable()
    ids = table.ids(texts)
    columns = table.columns()
    return StoredStrings(columns["strings.text"], columns["strings.ends"]), ids


def test_strings_come_back_exactly_one_by_one_and_many_at_once():
    strings, ids = _stored(TEXTS)
    assert [strings[int(i)] for i in ids] == TEXTS
    assert strings.many(ids.tolist()) == TEXTS
    assert strings.many([-1, int(ids[2])]) == [None, "naïve café"]
    assert strings[-1] is None


def test_a_span_of_ascii_keys_is_decoded_at_once_and_a_span_of_others_one_by_one():
    strings, _ = _stored(["fact:a", "fact:bb", "episode:c"])
    assert strings.span(0, 3) == ["fact:a", "fact:bb", "episode:c"]
    other, _ = _stored(["é", "fact:b"])
    assert other.span(0, 2) == ["é", "fact:b"]


class _CountedReads:
    """A string table's text read by position, each read counted (a file read, in effect)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.reads: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, at: slice) -> bytes:
        self.reads.append((at.start, at.stop))
        return self._data[at]


def _columns(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    table = StringTable()
    table.ids(texts)
    columns = table.columns()
    return columns["strings.text"], columns["strings.ends"]


def _read_by_position(texts: list[str]) -> tuple[StoredStrings, np.ndarray, _CountedReads]:
    table = StringTable()
    ids = table.ids(texts)
    columns = table.columns()
    reader = _CountedReads(columns["strings.text"].tobytes())
    strings = StoredStrings(columns["strings.text"], columns["strings.ends"], reader=reader)
    return strings, ids, reader


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(max_size=40), min_size=1, max_size=30, unique=True),
    picks=st.lists(st.integers(min_value=-1, max_value=29), max_size=40),
)
def test_strings_read_by_position_are_the_strings_read_in_place(texts, picks):
    in_place, ids = _stored(texts)
    by_position, _, _ = _read_by_position(texts)
    numbers = [int(ids[p % len(ids)]) if p >= 0 else -1 for p in picks]
    expected = [texts[p % len(texts)] if p >= 0 else None for p in picks]
    few = stored_columns._FEW
    try:
        for stored_columns._FEW in (0, few, 1000):  # placed with numpy, as found, in Python
            _, _, fresh = _read_by_position(texts)  # nothing kept from an earlier read
            assert StoredStrings(*_columns(texts), reader=fresh).many(numbers) == expected
    finally:
        stored_columns._FEW = few
    assert by_position.many(numbers) == in_place.many(numbers)
    assert in_place.many(numbers) == expected
    assert [by_position[n] for n in numbers] == [in_place[n] for n in numbers]
    assert by_position.span(0, len(texts)) == in_place.span(0, len(texts))


def test_strings_near_one_another_are_read_in_one_piece_and_far_ones_apart():
    far = "x" * 100_000  # more than the gap read through between two strings
    strings, ids, reader = _read_by_position(["alpha", "beta", "gamma", far, "delta"])
    assert strings.many([int(ids[2]), -1, int(ids[0]), int(ids[1])]) == [
        "gamma",
        None,
        "alpha",
        "beta",
    ]
    assert len(reader.reads) == 1
    strings, ids, reader = _read_by_position(["alpha", "beta", "gamma", far, "delta"])
    assert strings.many([int(ids[0]), int(ids[4])]) == ["alpha", "delta"]
    assert len(reader.reads) == 2 and all(stop - start < 100 for start, stop in reader.reads)
    reader.reads.clear()
    assert strings.many([-1, -1]) == [None, None] and reader.reads == []


def test_short_strings_once_read_are_not_read_again_and_long_ones_are():
    long = "y" * 100  # longer than the strings kept once decoded
    strings, ids, reader = _read_by_position(["alpha", long, "beta"])
    assert strings.many([int(ids[0]), int(ids[1])]) == ["alpha", long]
    reader.reads.clear()
    assert strings.many([int(ids[0]), -1, int(ids[0])]) == ["alpha", None, "alpha"]
    assert reader.reads == []
    assert strings.many([int(ids[1]), int(ids[0]), int(ids[2])]) == [long, "alpha", "beta"]
    assert len(reader.reads) == 1
    assert strings[int(ids[2])] == "beta" and len(reader.reads) == 1


def test_a_reader_that_does_not_hold_the_text_is_refused():
    table = StringTable()
    table.ids(["a", "b"])
    columns = table.columns()
    with pytest.raises(ValueError, match="reader does not hold the text"):
        StoredStrings(columns["strings.text"], columns["strings.ends"], reader=_CountedReads(b"a"))


def test_ends_cutting_a_character_read_as_replacement_never_raise():
    text = np.frombuffer("é".encode(), dtype=np.uint8)  # two bytes
    strings = StoredStrings(text, np.array([1, 2], dtype=np.int64))
    assert strings[0] == "\ufffd" and strings.many([1]) == ["\ufffd"]
    # read together, in one piece: the whole strings whole, the cut ones as replacement
    text = np.frombuffer("naïveé".encode(), dtype=np.uint8)
    strings = StoredStrings(text, np.array([6, 7, 8], dtype=np.int64))
    assert strings.many([2, 0, 1]) == ["\ufffd", "naïve", "\ufffd"]


@pytest.mark.parametrize(
    "ends",
    [[3, 2, 5], [1, 2, 9], [-1, 5]],
    ids=["backwards", "past the text", "negative"],
)
def test_ends_that_do_not_fit_the_text_are_refused(ends):
    text = np.frombuffer(b"hello", dtype=np.uint8)
    with pytest.raises(ValueError, match="ends do not match"):
        StoredStrings(text, np.array(ends, dtype=np.int64))


def test_a_number_past_the_table_is_refused():
    strings, _ = _stored(["a", "b"])
    with pytest.raises(ValueError, match="past the table"):
        strings.check(np.array([0, 2], dtype=np.int32), "doc.kind")
    with pytest.raises(ValueError, match="past the table"):
        strings.check(np.array([-1], dtype=np.int32), "doc.key", none=False)


@pytest.mark.parametrize("ends", [[1, 0, 2], [-1, 2, 2], [1, 2, 3]])
def test_runs_whose_ends_do_not_fit_their_strings_are_refused(ends):
    strings, ids = _stored(["a", "b"])
    with pytest.raises(ValueError, match="runs: columns do not fit"):
        Runs(strings, ids, np.array(ends, dtype=np.int64), 3)


def test_runs_come_back_as_tuples_of_their_strings():
    strings, ids = _stored(["payment", "service", "ledger"])
    runs = Runs(strings, ids[[0, 1, 2, 0]], np.array([2, 2, 4], dtype=np.int64), 3)
    assert [runs[r] for r in range(3)] == [("payment", "service"), (), ("ledger", "payment")]
    assert runs.lengths().tolist() == [2, 0, 2]


def test_a_slot_list_makes_stored_slots_and_holds_what_is_written_or_added():
    made: list[int] = []

    def make(slot: int) -> str:
        made.append(slot)
        return f"stored {slot}"

    slots = SlotList(3, make, cache=8)
    assert slots[1] == "stored 1" and slots[1] == "stored 1" and made == [1]  # kept once made
    slots[1] = "written"
    slots.append("added")
    assert list(slots) == ["stored 0", "written", "stored 2", "added"]
    assert slots == ["stored 0", "written", "stored 2", "added"]
    assert slots[-1] == "added" and len(slots) == 4
    assert [slots.made(s) for s in range(4)] == [True, False, True, False]
    with pytest.raises(IndexError):
        slots[4]


def test_a_stored_table_makes_each_node_once_and_changes_it_in_place():
    runs = {"a": {"k1": 1}, "b": {"k2": 2, "k3": 3}}
    calls: list[tuple[int, int]] = []

    def rows(start: int, end: int) -> dict[str, int]:
        calls.append((start, end))
        return dict(runs["a" if start == 0 else "b"])

    table: StoredTable[int] = StoredTable(["a", "b"], [1, 3], rows)
    assert table["b"] == {"k2": 2, "k3": 3} and table.get("b") is table["b"]
    assert calls == [(1, 3)]
    table.get("a", {}).pop("k1")
    table.setdefault("c", {})["k4"] = 4
    assert dict(table) == {"a": {}, "b": {"k2": 2, "k3": 3}, "c": {"k4": 4}}
    assert table.get("missing") is None and "missing" not in table and len(table) == 3
    del table["b"]
    assert list(table) == ["a", "c"]
    assert table.get("b") is None and table.get("b", {}) == {} and table.get("c") == {"k4": 4}


def test_a_stored_tables_entries_and_holds_answer_as_its_dicts_do_without_making_them():
    runs = {"a": {"k1": 1}, "b": {"k2": 2, "k3": 3}, "e": {}}
    made: list[tuple[int, int]] = []

    def rows(start: int, end: int) -> dict[str, int]:
        made.append((start, end))
        return dict(runs[{0: "a", 1: "b", 3: "e"}[start]])

    def values(start: int, end: int) -> list[int]:
        return list(runs[{0: "a", 1: "b", 3: "e"}[start]].values())

    table: StoredTable[int] = StoredTable(["a", "b", "e"], [1, 3, 3], rows, values)
    plain = {node: dict(run) for node, run in runs.items()}
    for node in ("a", "b", "e", "missing"):
        assert list(entries(table, node)) == list(entries(plain, node))
        assert holds(table, node) is holds(plain, node)
    assert made == [] and holds(table, "b") and not holds(table, "e")
    for each in (table, plain):  # changed in place: the dict made is the one read from then on
        each["b"].pop("k2")
        each.setdefault("e", {})["k5"] = 5
        each["a"].pop("k1")
    for node in ("a", "b", "e"):
        assert list(entries(table, node)) == list(entries(plain, node))
        assert holds(table, node) is holds(plain, node)
    assert not holds(table, "a") and holds(table, "e")


def test_stored_postings_read_in_place_then_change_like_dicts():
    stored = Postings(
        ["order", "email"],
        np.array([2, 3], dtype=np.int64),
        np.array([0, 4, 2], dtype=np.int32),
        np.array([1, 2, 1], dtype=np.int32),
    )
    fresh = Postings()
    for term, slot, tf in [("order", 0, 1), ("order", 4, 2), ("email", 2, 1)]:
        fresh.add(term, slot, tf)
    assert stored == fresh and stored.frequency("order") == 2
    run = stored.run("order")
    assert run is not None and run[0].tolist() == [0, 4] and run[1].tolist() == [1, 2]
    for each in (stored, fresh):
        each.remove("order", 0)
        each.add("order", 1, 3)
        each.remove("email", 2)
        each.add("database", 5, 1)
    assert stored == fresh
    assert stored.as_dicts() == {"database": {5: 1}, "order": {1: 3, 4: 2}}
    assert stored.run("email") is None and stored.frequency("email") == 0
    assert sorted(stored.terms()) == ["database", "order"]


#: A write to postings: (an add, else a removal; the term; the slot; the frequency added).
WRITE = st.tuples(
    st.booleans(),
    st.sampled_from(["order", "email", "retry", "ledger"]),
    st.integers(0, 40),
    st.integers(1, 4),
)


@settings(max_examples=200, deadline=None)
@given(
    stored=st.dictionaries(
        st.sampled_from(["order", "email", "retry"]),
        st.dictionaries(st.integers(0, 30), st.integers(1, 4), min_size=1, max_size=12),
        max_size=3,
    ),
    writes=st.lists(WRITE, max_size=40),
)
def test_writes_to_stored_postings_read_as_writes_to_dicts(stored, writes):
    """A restored index's postings, written to, hold what a fresh index's hold after the same
    writes: the same runs, frequencies, terms, and the same moves of the vocabulary. The
    restore stored 31 documents (slots 0 to 30); writes reach the slots added since too."""
    terms = sorted(stored)
    runs = [sorted(stored[t].items()) for t in terms]
    restored = Postings(
        terms,
        np.cumsum([len(r) for r in runs]).astype(np.int64),
        np.array([s for r in runs for s, _ in r], dtype=np.int32),
        np.array([f for r in runs for _, f in r], dtype=np.int32),
        stored_slots=31,
    )
    fresh = Postings()
    for term in terms:
        for slot, tf in stored[term].items():
            fresh.add(term, slot, tf)
    assert restored == fresh
    moves = restored.vocabulary, fresh.vocabulary
    for is_add, term, slot, tf in writes:
        for each in (restored, fresh):
            if is_add:
                each.add(term, slot, tf)
            else:
                each.remove(term, slot)
        assert restored.run(term) is None or restored.run(term)[0].tolist() == sorted(
            fresh.as_dicts().get(term, {})
        )
    assert restored == fresh
    for term in ("order", "email", "retry", "ledger"):
        assert restored.frequency(term) == fresh.frequency(term)
    assert sorted(restored.terms()) == sorted(fresh.terms())
    assert restored.vocabulary - moves[0] == fresh.vocabulary - moves[1]


def test_a_write_to_a_long_stored_run_keeps_only_what_it_changed():
    slots = np.arange(0, 50_000, dtype=np.int32)
    postings = Postings(["common"], np.array([50_000]), slots, np.ones(50_000, dtype=np.int32))
    postings.add("common", 60_000, 2)
    postings.remove("common", 7)
    assert postings._changed["common"] == {60_000: 2, 7: 0}  # not a copy of the run
    run = postings.run("common")
    assert run is not None and len(run[0]) == postings.frequency("common") == 50_000
    assert 7 not in run[0] and run[0][-1] == 60_000 and run[1][-1] == 2


@settings(max_examples=200, deadline=None)
@given(
    writes=st.lists(WRITE, max_size=60),
    compactions=st.sets(st.integers(0, 60), max_size=3),
)
def test_compacted_postings_read_and_change_as_the_dicts_they_were_made_from(writes, compactions):
    """An index built from the rows compacts its postings into stored runs (as a restored one
    holds them): at any point, and again later, they read as the dicts would, and later writes
    change them alike; the vocabulary does not move for a compaction."""
    compacted, fresh = Postings(), Postings()
    for step, (is_add, term, slot, tf) in enumerate(writes):
        if step in compactions:
            vocabulary = compacted.vocabulary
            compacted.compact()
            assert compacted._changed == {}  # every term read in place, no dict kept
            assert compacted.vocabulary == vocabulary and compacted == fresh
        for each in (compacted, fresh):
            if is_add:
                each.add(term, slot, tf)
            else:
                each.remove(term, slot)
    assert compacted == fresh
    for term in ("order", "email", "retry", "ledger"):
        assert compacted.frequency(term) == fresh.frequency(term)
        runs = compacted.run(term), fresh.run(term)
        assert (runs[0] is None) == (runs[1] is None)
        if runs[0] is not None:
            assert runs[0][0].tolist() == runs[1][0].tolist()
            assert runs[0][1].tolist() == runs[1][1].tolist()
    assert sorted(compacted.terms()) == sorted(fresh.terms())
    assert compacted.vocabulary == fresh.vocabulary


def test_a_string_table_leaves_no_reference_cycle_behind():
    """A snapshot's string table holds every string of the index while it is written: let go,
    it must be freed at once, not left to a full collection (which a process that freezes its
    objects after a build may never run)."""
    gc.collect()
    gc.disable()
    try:
        table = StringTable()
        table.ids([*TEXTS, None])
        table.columns()
        del table
        assert gc.collect() == 0
    finally:
        gc.enable()
