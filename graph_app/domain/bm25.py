"""Okapi BM25 over a mutable document set, with exact-identifier boosting.

Scores are Okapi BM25 as rank-bm25's ``BM25Okapi`` computes them (k1=1.5, b=0.75; a term in
more than half of the documents, whose IDF log((N - df + 0.5) / (df + 0.5)) is negative, gets
epsilon x the average IDF instead, and never less than zero, which a tiny corpus can produce).
The formula is written out here rather than borrowed from rank-bm25: its public API scores a
corpus given whole at construction, while this index changes one document at a time (term
postings, document frequencies and lengths are maintained incrementally) and a query only
touches the postings of its own terms instead of every document. Each term's IDF is worked out
from the document frequencies as they are when a query first asks for it after the set changed
(the floor of the common terms from every term, in sorted term order), so an index brought up
to date by a series of writes scores exactly like one built from scratch over the same
documents (the tests check the scores against ``BM25Okapi.get_scores``). Pure Python + numpy:
no Django import.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeVar, overload

import numpy as np

from graph_app.domain.postings import Postings, index_of
from graph_app.domain.stored_columns import SlotList, Slots
from graph_app.domain.working_set import TERMS_KEPT, grown, kept

T = TypeVar("T")

K1 = 1.5
B = 0.75
EPSILON = 0.25
# Extra weight, in multiples of the term's IDF, for a query identifier found whole in a
# document: "order_repository" should beat a document that only says "order" and "repository".
# Distinct known query terms up to which matches are tallied as bit masks (a table of 2^n sums).
MATCH_TERMS_MAX = 12
IDENTIFIER_BOOST = 1.0
# ``weighted_scores`` searches each term's run for the slots asked for once the corpus holds
# more than this many documents per slot asked for.
SEARCHED_SCORES_RATIO = 8


def okapi_raw_idf(n_docs: int, df: int) -> float:
    """Okapi IDF of a term that ``df`` of ``n_docs`` documents hold, before the floor:
    log((N - df + 0.5) / (df + 0.5)), negative for a term in more than half of them."""
    return math.log(n_docs - df + 0.5) - math.log(df + 0.5)


def okapi_floor(n_docs: int, frequencies: Iterable[int], epsilon: float) -> float:
    """The IDF a term with a negative raw IDF gets: ``epsilon`` x the average raw IDF over every
    term (their document frequencies given in sorted term order, so the float does not depend on
    arrival order), never below zero."""
    total = 0.0
    count = 0
    for df in frequencies:
        total += okapi_raw_idf(n_docs, df)
        count += 1
    return max(epsilon * total / count, 0.0) if count else 0.0


def okapi_idf(n_docs: int, document_frequency: dict[str, int], epsilon: float) -> dict[str, float]:
    """Okapi IDF per term (``okapi_raw_idf``); a negative one (a term in more than half of the
    documents) becomes the floor (``okapi_floor``), and no IDF is below zero, so a term present
    in a document never makes it rank below one without it. ``document_frequency`` in sorted
    term order."""
    if not n_docs or not document_frequency:
        return {}
    raw = {term: okapi_raw_idf(n_docs, df) for term, df in document_frequency.items()}
    if min(raw.values()) >= 0:
        return raw
    floor = okapi_floor(n_docs, document_frequency.values(), epsilon)
    return {term: value if value >= 0 else floor for term, value in raw.items()}


class OkapiIdfTable(Mapping[str, float]):
    """``okapi_idf`` of an index's documents as they are, each term's worked out when first
    asked for (a query reads a few dozen of its terms; the whole table at 100k facts took
    about 15 ms after every write). The floor, which needs every term's frequency, is worked out
    only when a term below zero is asked for. The same floats as ``okapi_idf``: terms summed
    in sorted order. Valid until the document set changes (``BM25Index`` then makes another)."""

    def __init__(self, postings: Postings, n_docs: int, epsilon: float) -> None:
        self._postings = postings
        self._n_docs = n_docs
        self._epsilon = epsilon
        self._made: dict[str, float] = {}
        self._floor: float | None = None

    @overload
    def get(self, term: str, /) -> float | None: ...
    @overload
    def get(self, term: str, default: float | T, /) -> float | T: ...

    def get(self, term: str, default: object = None, /) -> object:
        found = self._made.get(term)
        if found is None:
            df = self._postings.frequency(term)
            if not df:
                return default
            found = okapi_raw_idf(self._n_docs, df)
            if found < 0:
                found = self.floor()
            self._made[term] = found
        return found

    def floor(self) -> float:
        """``okapi_floor`` of the documents (worked out once)."""
        if self._floor is None:
            frequency = self._postings.frequency
            terms = sorted(self._postings.terms())
            self._floor = okapi_floor(self._n_docs, map(frequency, terms), self._epsilon)
        return self._floor

    def __getitem__(self, term: str) -> float:
        found = self.get(term)
        if found is None:
            raise KeyError(term)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._postings.terms()))

    def __len__(self) -> int:
        return sum(1 for _ in self._postings.terms())


class BM25Index:
    """Documents keyed by string, scored with BM25Okapi; slots are stable integer positions."""

    def __init__(self, *, k1: float = K1, b: float = B, epsilon: float = EPSILON) -> None:
        self.k1 = k1
        self.b = b
        self.epsilon = epsilon
        # Slot by key, made from ``_keys`` when first asked for (``_slot_of``): a restored
        # index answers queries by slot, and only a write or a lookup by key needs the map.
        self._slot_of_made: dict[str, int] | None = {}
        self._keys: list[str | None] | SlotList[str | None] = []
        # Each document's tokens as given (the caller's tuple, shared, not copied): term
        # frequencies are counted again only when a document is replaced.
        self._doc_tokens: Slots[Sequence[str]] = list[Sequence[str]]()
        # Each slot's length in tokens, kept in an array with room to grow: a write sets its
        # slot's, and the length normalisation reads them without converting a list per write.
        self._lengths = np.zeros(0)
        self._postings = Postings()
        self._total_len = 0
        self._dirty = True
        self._idf = OkapiIdfTable(self._postings, 0, epsilon)
        self._avgdl = 0.0
        # Each document's length normalisation by ``b`` (the index's, or a query's own).
        self._norms: dict[float, np.ndarray] = {}
        # Per term: its documents' slots and the term's BM25 score in each, valid until the
        # document set changes (the IDF and the length normalisation move then).
        self._contributions: dict[tuple[str, float], tuple[np.ndarray, np.ndarray]] = {}

    # -- maintenance ---------------------------------------------------------------------

    @property
    def _slot_of(self) -> dict[str, int]:
        made = self._slot_of_made
        if made is None:
            made = {key: slot for slot, key in enumerate(self._keys) if key is not None}
            if len(made) != len(self._keys):
                raise ValueError("document keys: not one per document")
            self._slot_of_made = made
        return made

    def __len__(self) -> int:
        # Every slot holds a document: one is replaced in its slot, never taken out.
        return len(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._slot_of

    @property
    def n_slots(self) -> int:
        return len(self._keys)

    def slot(self, key: str) -> int | None:
        return self._slot_of.get(key)

    @property
    def slots(self) -> dict[str, int]:
        """Slot by key (read-only use: loops that look many keys up)."""
        return self._slot_of

    def key(self, slot: int) -> str | None:
        return self._keys[slot]

    def keys(self) -> list[str]:
        return list(self._slot_of)

    def upsert(self, key: str, tokens: Sequence[str]) -> int:
        """Add or replace the document ``key``; answers its slot."""
        terms = Counter(tokens)
        if key in self._slot_of:
            slot = self._slot_of[key]
            if Counter(self._doc_tokens[slot]) == terms:
                self._doc_tokens[slot] = tokens
                return slot
            self._unindex(slot)
        else:
            slot = len(self._keys)
            self._keys.append(None)
            self._doc_tokens.append(())
            if slot >= len(self._lengths):
                longer = np.zeros(grown(len(self._lengths), slot + 1))
                longer[: len(self._lengths)] = self._lengths
                self._lengths = longer
        self._slot_of[key] = slot
        self._keys[slot] = key
        self._doc_tokens[slot] = tokens
        self._lengths[slot] = len(tokens)
        self._total_len += len(tokens)
        for term, tf in terms.items():
            self._postings.add(term, slot, tf)
        self._dirty = True
        return slot

    def _unindex(self, slot: int) -> None:
        for term in set(self._doc_tokens[slot]):
            self._postings.remove(term, slot)
        self._total_len -= int(self._lengths[slot])
        self._lengths[slot] = 0
        self._dirty = True

    def compact(self) -> None:
        """The postings as a restored snapshot holds them (``Postings.compact``): after a build
        from the rows, so that queries read each term's run in place."""
        self._postings.compact(stored_slots=len(self._keys))

    def prepare(self) -> None:
        """Computes the statistics the next query needs (average length, the table each term's
        IDF goes into) now rather than at that query: before a server forks its workers, so that
        they share them."""
        self._refresh()

    def _refresh(self) -> None:
        if not self._dirty:
            return
        n_docs = len(self._keys)
        self._avgdl = self._total_len / n_docs if n_docs else 0.0
        self._contributions = {}
        # Length normalisations are the same for every query until the set changes.
        self._norms = {}
        self._idf = OkapiIdfTable(self._postings, n_docs, self.epsilon)
        self._dirty = False

    # -- scoring -------------------------------------------------------------------------

    def terms(self) -> Iterator[str]:
        """Every term some document holds."""
        return self._postings.terms()

    @property
    def vocabulary(self) -> int:
        """A number that moves whenever ``terms`` changes."""
        return self._postings.vocabulary

    def document_frequency(self, term: str) -> int:
        """How many documents hold ``term`` (0: the index does not know it)."""
        return self._postings.frequency(term)

    def idf(self, term: str) -> float:
        self._refresh()
        return self._idf.get(term, 0.0)

    def _posting_array(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        return self._postings.run(term)

    def _norm(self, b: float | None) -> np.ndarray:
        """k1 x (1 - b + b x length / average length) per slot, for the index's ``b`` or another
        (a query profile's: how much a long document's extra words should count against it)."""
        b = self.b if b is None else b
        norm = self._norms.get(b)
        if norm is None:
            lengths = self._lengths[: len(self._keys)]
            ratio = lengths / self._avgdl if self._avgdl else lengths
            norm = self._norms[b] = self.k1 * (1 - b + b * ratio)
        return norm

    def dense_scores(
        self,
        query: Sequence[str],
        *,
        boost_identifiers: Iterable[str] = (),
        b: float | None = None,
    ) -> np.ndarray:
        """BM25Okapi scores of every slot for ``query`` (repeated terms count again, as in
        rank-bm25), plus ``IDENTIFIER_BOOST`` x IDF for each whole identifier a document holds.
        ``b``: the length normalisation, when not the index's."""
        self._refresh()
        size = len(self._keys)
        if not size:
            return np.zeros(size)
        slots: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        for term in query:
            contribution = self.contribution(term, b)
            if contribution is not None:
                slots.append(contribution[0])
                scores.append(contribution[1])
        # Sorted: added in the same order in every process (a set's order is not).
        for identifier in sorted(set(boost_identifiers)):
            arrays = self._posting_array(identifier)
            if arrays is not None:
                slots.append(arrays[0])
                scores.append(
                    np.full(len(arrays[0]), IDENTIFIER_BOOST * self.smooth_idf(identifier))
                )
        return _summed(slots, scores, size)

    def contribution(self, term: str, b: float | None) -> tuple[np.ndarray, np.ndarray] | None:
        """(slots, BM25 score) of the documents holding ``term`` (each slot once), ``b`` as in
        ``dense_scores``; None when no document holds it."""
        self._refresh()
        b = self.b if b is None else b
        cached = self._contributions.get((term, b))
        if cached is None:
            cached = self._term_scores(term, b)
            if cached is None:
                return None
            kept(self._contributions, (term, b), cached, TERMS_KEPT)
        return cached

    def weighted_scores(
        self, weighted: Sequence[tuple[str, float]], slots: np.ndarray, *, b: float | None = None
    ) -> np.ndarray:
        """Per slot of ``slots``, the sum over (term, weight) of weight x the term's BM25Okapi
        contribution (``b`` as in ``dense_scores``), added term by term in the given order: the
        float ``contribution`` gives, however it is worked out. Over a corpus many times larger
        than ``slots``, each term's run is searched for them (the work grows with the slots asked
        for, not with how many documents hold the term); otherwise each run is added into a
        corpus-sized array, cheaper then."""
        self._refresh()
        b = self.b if b is None else b
        at = index_of(slots)
        if len(self._keys) > SEARCHED_SCORES_RATIO * len(at):
            return self._searched_scores(weighted, at, b)
        return self._scattered_scores(weighted, at, b)

    def _term_scores(
        self, term: str, b: float, at: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``contribution(term, b)`` as kept, else made for this call alone (of the run's
        positions ``at`` only, when given)."""
        found = self._contributions.get((term, b))
        if found is not None:
            return found if at is None else (found[0][at], found[1][at])
        arrays = self._posting_array(term)
        if arrays is None:
            return None
        held, tfs = arrays if at is None else (arrays[0][at], arrays[1][at])
        norm = self._norm(b)[index_of(held)]
        return held, self._idf.get(term, 0.0) * (tfs * (self.k1 + 1) / (tfs + norm))

    def _scattered_scores(
        self, weighted: Sequence[tuple[str, float]], at: np.ndarray, b: float
    ) -> np.ndarray:
        total = np.zeros(len(self._keys))
        for term, weight in weighted:
            found = self._term_scores(term, b)
            if found is not None:
                total[index_of(found[0])] += weight * found[1]
        return total[at]

    def _searched_scores(
        self, weighted: Sequence[tuple[str, float]], at: np.ndarray, b: float
    ) -> np.ndarray:
        total = np.zeros(len(at))
        for term, weight in weighted:
            found = self._contributions.get((term, b))
            arrays = found if found is not None else self._posting_array(term)
            if arrays is None:
                continue
            held = arrays[0]  # in slot order
            # Searched as the run's own type (a restored run's int32): numpy would otherwise
            # copy the whole run to the slots' type for each search.
            place = np.searchsorted(held, at.astype(held.dtype, copy=False))
            hit = place < len(held)
            hit[hit] = held[place[hit]] == at[hit]
            scores = self._term_scores(term, b, place[hit])
            assert scores is not None
            total[hit] += weight * scores[1]
        return total

    def idf_table(self) -> Mapping[str, float]:
        """Okapi IDF by term (``idf`` for many terms at once; read-only)."""
        self._refresh()
        return self._idf

    def smooth_idf(self, term: str) -> float:
        """Always-positive IDF, log(1 + (N - df + 0.5) / (df + 0.5)): Okapi's IDF is zero for a
        term in half of the documents, which in a small project is most terms."""
        df = self._postings.frequency(term)
        if not df:
            return 0.0
        n_docs = len(self._keys)
        return math.log1p((n_docs - df + 0.5) / (df + 0.5))

    def matched_weight(self, query: Sequence[str]) -> np.ndarray:
        """Per slot, the smoothed IDF summed over the distinct query terms it contains: tells a
        match from a miss (and a rare match from a common one) where BM25 scores are zero."""
        table = self.match_table(query)
        if table is not None:
            mask, sums = table
            return sums[mask]
        weights = np.zeros(len(self._keys))
        for term in sorted(set(query)):
            arrays = self._posting_array(term)
            if arrays is not None:
                weights[index_of(arrays[0])] += self.smooth_idf(term)
        return weights

    def match_table(self, query: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """Which of the query's distinct known terms each slot contains, as a bit mask per slot
        (bit i: the i-th of them in sorted order), and for each mask the sum of their smoothed
        IDFs (what ``matched_weight`` gives a slot holding those terms; added in the same
        order, so equal to the float). None past ``MATCH_TERMS_MAX`` terms: the table would
        outgrow the corpus."""
        self._refresh()
        terms = [t for t in sorted(set(query)) if self._postings.frequency(t)]
        if len(terms) > MATCH_TERMS_MAX:
            return None
        mask = np.zeros(len(self._keys), dtype=np.uint16)
        masks = np.arange(1 << len(terms), dtype=np.uint16)
        sums = np.zeros(len(masks))
        for bit, term in enumerate(terms):
            arrays = self._posting_array(term)
            assert arrays is not None
            mask[index_of(arrays[0])] |= np.uint16(1 << bit)
            # Adding 0.0 where the bit is clear leaves the sum as it is: the same float as
            # adding the term's weight only to the slots that hold it.
            sums += ((masks >> bit) & 1) * self.smooth_idf(term)
        return mask, sums

    def scores(self, query: Sequence[str]) -> dict[str, float]:
        """Scores by key for every live document (mainly for tests and small corpora)."""
        dense = self.dense_scores(query)
        return {key: float(dense[slot]) for key, slot in self._slot_of.items()}


def _summed(slots: list[np.ndarray], values: list[np.ndarray], size: int) -> np.ndarray:
    """Per slot of ``size``, the sum of the ``values`` given to it, added in the order given
    (runs of slots each holding a slot once): ``bincount`` adds them one after the other in one
    pass, the same floats as adding each run into a zeroed array in turn, without the gather
    and scatter of each run's fancy indexing."""
    if not slots:
        return np.zeros(size)
    return np.bincount(
        index_of(np.concatenate(slots)), weights=np.concatenate(values), minlength=size
    )
