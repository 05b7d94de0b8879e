"""The BM25 postings: for each term, the documents holding it (by slot) and how often.

A fresh index keeps them as dicts. One restored from its snapshot keeps the stored runs (a term's
slots, ascending, and frequencies) where the file put them and reads a query term's run in place;
a term a later write touches becomes a dict of its own, copied once from its run. Pure Python +
numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

Run = tuple[np.ndarray, np.ndarray]


class Postings:
    """term -> {slot: term frequency}, stored runs under the terms changed since."""

    def __init__(
        self,
        terms: list[str] | None = None,
        ends: np.ndarray | None = None,
        slots: np.ndarray | None = None,
        frequencies: np.ndarray | None = None,
    ) -> None:
        self._run: dict[str, int] = {t: i for i, t in enumerate(terms or ())}
        self._ends = [] if ends is None else ends.tolist()
        self._slots = np.zeros(0, dtype=np.int64) if slots is None else slots
        self._tfs = np.zeros(0, dtype=np.int64) if frequencies is None else frequencies
        if self._run and (len(self._ends) != len(self._run) or self._ends[-1] != len(self._slots)):
            raise ValueError("postings: columns do not fit together")
        # Terms written since (copied from their run once), and their runs made for queries.
        self._changed: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, Run] = {}
        # Moves whenever a term comes to be held by some document or by none.
        self.vocabulary = 0

    def _stored(self, term: str) -> Run | None:
        run = self._run.get(term)
        if run is None:
            return None
        start = self._ends[run - 1] if run else 0
        return self._slots[start : self._ends[run]], self._tfs[start : self._ends[run]]

    def _changing(self, term: str) -> dict[int, int]:
        self._arrays.pop(term, None)
        changed = self._changed.get(term)
        if changed is None:
            stored = self._stored(term)
            changed = self._changed[term] = (
                {}
                if stored is None
                else dict(zip(stored[0].tolist(), stored[1].tolist(), strict=True))
            )
        return changed

    def add(self, term: str, slot: int, frequency: int) -> None:
        posting = self._changing(term)
        self.vocabulary += not posting
        posting[slot] = frequency

    def remove(self, term: str, slot: int) -> None:
        posting = self._changing(term)
        if posting.pop(slot, None) is not None and not posting:
            self.vocabulary += 1

    def frequency(self, term: str) -> int:
        """How many documents hold ``term``."""
        changed = self._changed.get(term)
        if changed is not None:
            return len(changed)
        stored = self._stored(term)
        return 0 if stored is None else len(stored[0])

    def run(self, term: str) -> Run | None:
        """(slots ascending, frequencies) of the documents holding ``term``; None: none."""
        if term not in self._changed:
            stored = self._stored(term)
            return stored if stored is not None and len(stored[0]) else None
        cached = self._arrays.get(term)
        if cached is None:
            posting = self._changed[term]
            if not posting:
                return None
            slots = np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))
            tfs = np.fromiter(posting.values(), dtype=np.int64, count=len(posting))
            order = np.argsort(slots)
            cached = self._arrays[term] = (slots[order], tfs[order])
        return cached

    def terms(self) -> Iterator[str]:
        """Every term some document holds."""
        for term in self._run:
            if term not in self._changed and self.frequency(term):
                yield term
        yield from (term for term, posting in self._changed.items() if posting)

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
