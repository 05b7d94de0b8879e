"""The BM25 postings: for each term, the documents holding it (by slot) and how often.

A fresh index keeps them as dicts while it is built, then compacts them (``compact``) into the
stored runs a restored one holds. One restored from its snapshot keeps the stored runs (a term's
slots, ascending, and frequencies) where the file put them and reads a query term's run in place;
a later write to a stored term is kept beside its run, as that term's changes (slot -> frequency,
0 for a document that no longer holds it), and a query reads the run merged with them. A write
costs what it changes, not a copy of the term's run: a common term's run holds a large share of
the documents, and a process replaying the writes since its snapshot would otherwise hold a dict
of each such run. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from graph_app.domain.working_set import TERMS_KEPT, kept

Run = tuple[np.ndarray, np.ndarray]


def index_of(slots: np.ndarray) -> np.ndarray:
    """``slots`` as numpy's own index type, to index a per-slot array with. A restored run's
    slots are stored as int32 (half the file), and numpy would convert them element by element
    within every indexing, about twice as slow as converting them once first (the same for
    the uint16 masks of ``BM25Index.match_table``); slots already of that type are not copied."""
    return slots.astype(np.intp, copy=False)


class Postings:
    """term -> {slot: term frequency}: stored runs, and the changes written since."""

    def __init__(
        self,
        terms: list[str] | None = None,
        ends: np.ndarray | None = None,
        slots: np.ndarray | None = None,
        frequencies: np.ndarray | None = None,
        *,
        stored_slots: int | None = None,
    ) -> None:
        self._run: dict[str, int] = {t: i for i, t in enumerate(terms or ())}
        self._ends = [] if ends is None else ends.tolist()
        self._slots = np.zeros(0, dtype=np.int64) if slots is None else slots
        self._tfs = np.zeros(0, dtype=np.int64) if frequencies is None else frequencies
        if self._run and (len(self._ends) != len(self._run) or self._ends[-1] != len(self._slots)):
            raise ValueError("postings: columns do not fit together")
        # No stored run holds a slot from here on (the documents added since take new slots),
        # so a write there needs no search of the term's run. Given by a restore, which has
        # checked every stored slot against its documents' count.
        if stored_slots is None:
            stored_slots = int(self._slots.max()) + 1 if len(self._slots) else 0
        self._stored_slots = stored_slots
        # Per term written since: slot -> frequency (0: a stored entry no longer held), how
        # many documents hold the term now, and its run made for queries (until its next change;
        # at most TERMS_KEPT terms' at once, graph_app.domain.working_set).
        self._changed: dict[str, dict[int, int]] = {}
        self._held: dict[str, int] = {}
        self._arrays: dict[str, Run] = {}
        # Moves whenever a term comes to be held by some document or by none.
        self.vocabulary = 0

    def _stored(self, term: str) -> Run | None:
        run = self._run.get(term)
        if run is None:
            return None
        start = self._ends[run - 1] if run else 0
        return self._slots[start : self._ends[run]], self._tfs[start : self._ends[run]]

    def _changes(self, term: str) -> dict[int, int]:
        self._arrays.pop(term, None)
        changes = self._changed.get(term)
        if changes is None:
            changes = self._changed[term] = {}
            stored = self._stored(term)
            self._held[term] = 0 if stored is None else len(stored[0])
        return changes

    def _stored_frequency(self, term: str, slot: int) -> int:
        """The frequency of ``term`` in the document at ``slot`` as stored (0: not stored)."""
        if slot >= self._stored_slots:
            return 0
        stored = self._stored(term)
        if stored is None:
            return 0
        at = int(np.searchsorted(stored[0], slot))
        return int(stored[1][at]) if at < len(stored[0]) and stored[0][at] == slot else 0

    def add(self, term: str, slot: int, frequency: int) -> None:
        changes = self._changes(term)
        prior = changes.get(slot)
        if prior is None and term in self._run:
            prior = self._stored_frequency(term, slot)
        if not prior:
            self.vocabulary += not self._held[term]
            self._held[term] += 1
        changes[slot] = frequency

    def remove(self, term: str, slot: int) -> None:
        changes = self._changes(term)
        stored = self._stored_frequency(term, slot) if term in self._run else 0
        prior = changes.get(slot, stored)
        if not prior:
            return
        if stored:
            changes[slot] = 0  # masks the stored run's entry
        else:
            del changes[slot]
        self._held[term] -= 1
        self.vocabulary += not self._held[term]

    def frequency(self, term: str) -> int:
        """How many documents hold ``term``."""
        held = self._held.get(term)
        if held is not None:
            return held
        stored = self._stored(term)
        return 0 if stored is None else len(stored[0])

    def run(self, term: str) -> Run | None:
        """(slots ascending, frequencies) of the documents holding ``term``; None: none."""
        if term not in self._changed:
            stored = self._stored(term)
            return stored if stored is not None and len(stored[0]) else None
        if not self._held[term]:
            return None
        cached = self._arrays.get(term)
        if cached is None:
            changes = self._changed[term]
            changed = np.fromiter(changes.keys(), dtype=np.int64, count=len(changes))
            tfs = np.fromiter(changes.values(), dtype=np.int64, count=len(changes))
            held = tfs > 0
            slots, tfs = changed[held], tfs[held]
            stored = self._stored(term)
            if stored is not None:
                unchanged = ~np.isin(stored[0], changed)
                slots = np.concatenate((stored[0][unchanged].astype(np.int64), slots))
                tfs = np.concatenate((stored[1][unchanged].astype(np.int64), tfs))
            order = np.argsort(slots, kind="stable")
            # Kept as a stored run is (int32: half of int64), for at most TERMS_KEPT terms.
            merged = (slots[order].astype(np.int32), tfs[order].astype(np.int32))
            cached = kept(self._arrays, term, merged, TERMS_KEPT)
        return cached

    def compact(self, *, stored_slots: int | None = None) -> None:
        """Every term's documents made one stored run, as a restored snapshot holds them (terms
        in order, slots ascending, int32): a query then reads a term's run in place instead of
        first making it from the term's dict, as an index built from the rows had to for each
        term on its first query (about 1 ms for a term held by 30,000 documents), and the dicts
        are let go. The terms, their documents and ``vocabulary`` stay as they were.
        ``stored_slots``: as for the constructor (None: past the largest slot held)."""
        runs = sorted(self.runs(), key=lambda run: run[0])
        self._run = {term: place for place, (term, _) in enumerate(runs)}
        self._ends = np.cumsum([len(run[0]) for _, run in runs], dtype=np.int64).tolist()
        self._slots = np.concatenate(
            [np.zeros(0, np.int32), *(r[0].astype(np.int32) for _, r in runs)]
        )
        self._tfs = np.concatenate(
            [np.zeros(0, np.int32), *(r[1].astype(np.int32) for _, r in runs)]
        )
        if stored_slots is None:
            stored_slots = int(self._slots.max()) + 1 if len(self._slots) else 0
        self._stored_slots = stored_slots
        self._changed, self._held, self._arrays = {}, {}, {}

    def terms(self) -> Iterator[str]:
        """Every term some document holds."""
        for term in self._run:
            if term not in self._changed and self.frequency(term):
                yield term
        yield from (term for term in self._changed if self._held[term])

    def runs(self) -> Iterator[tuple[str, Run]]:
        """(term, its run) of every term some document holds."""
        for term in self.terms():
            found = self.run(term)
            assert found is not None
            yield term, found

    def as_dicts(self) -> dict[str, dict[int, int]]:
        """term -> {slot: frequency}, slots ascending: what two indexes compare."""
        return {
            term: dict(zip(slots.tolist(), tfs.tolist(), strict=True))
            for term, (slots, tfs) in sorted(self.runs())
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Postings):
            return NotImplemented
        return self.as_dicts() == other.as_dicts()

    __hash__ = None  # type: ignore[assignment]
