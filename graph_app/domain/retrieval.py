"""Ranking memory for a query: BM25, spreading activation, stream neighbours, visibility.

``MemoryIndex`` holds the project's tokenized documents (facts and episodes as plain
``MemoryDoc`` values) and keeps them searchable as they change, one document at a time.
``MemoryIndex.rank`` turns a query into a utility per document:

1. Okapi BM25 over the code-aware tokens, whole identifiers boosted (``bm25.py``);
2. pseudo-relevance feedback: the most distinctive terms of the best few documents are added
   to the query at a lower weight, so words the query did not use but its best answers share
   still count;
3. spreading activation from the entities of the best documents over visible edges, up to two
   hops, surfacing facts about entities the query did not name (``activation.py``);
4. stream neighbours: an episode that is part of a stream (a conversation, a migration log)
   lends part of its relevance to the episodes just before and after it, which often hold the
   answer to the question it raised or the context it relies on.

Visibility is decided per request: live (active facts, every episode), history included, or
bi-temporal time travel (valid at ``as_of`` as known at ``known_at``). Matching facts that are
hidden because they were superseded or closed are counted as suppressed. Pure Python + numpy:
no Django import.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from graph_app.domain.activation import spread_activation
from graph_app.domain.bm25 import BM25Index
from graph_app.domain.tokenize import identifiers, tokenize_query

INF = math.inf
_FILL = {
    "present": False,
    "fact": False,
    "recorded": INF,
    "start": -INF,
    "until": INF,
    "closed": INF,
    "key": "",
}


@dataclass(frozen=True)
class MemoryDoc:
    """One searchable memory item. Times are POSIX seconds (``INF`` = open / unknown)."""

    key: str
    kind: str  # "fact" | "episode"
    tokens: tuple[str, ...]
    entities: tuple[str, ...] = ()
    subject: str | None = None
    edge: tuple[str, str] | None = None
    stream: str | None = None
    position: int | None = None
    recorded_at: float = 0.0
    valid_from: float = -INF  # facts: valid_from; episodes: occurred_at
    valid_until: float = INF
    closed_at: float = INF
    payload: object = field(default=None, compare=False)


@dataclass(frozen=True)
class Visibility:
    """Which documents a request may see.

    ``as_of``/``known_at`` None and not ``include_superseded``: the live view (facts still
    open, every episode). With ``known_at``: only what had been recorded by then, closures
    learned later ignored. With ``as_of``: facts valid at that instant, episodes that had
    occurred by then.
    """

    as_of: float | None = None
    known_at: float | None = None
    include_superseded: bool = False
    # When given (time travel), exactly these facts are visible: the caller's bi-temporal
    # selector decided, including which of overlapping singular facts wins.
    fact_keys: frozenset[str] | None = None
    # The live view's instant: the facts valid then (a scheduled fact is not yet, a fact whose
    # successor is due later still is). None: the facts still open.
    now: float | None = None


@dataclass(frozen=True)
class RankParams:
    pool: int = 1000
    candidates: int = 300
    prf_docs: int = 3
    prf_terms: int = 8
    prf_weight: float = 0.3
    seeds: int = 5
    hops: int = 2
    decay: float = 0.5
    activation_weight: float = 0.5
    activation_min: float = 0.05
    activation_frontier: int = 12
    activated_max: int = 24
    stream_window: int = 2
    stream_weight: float = 0.5
    stream_sources: int = 40
    coordination: float = 0.75
    stream_backward: float = 0.7


@dataclass(frozen=True)
class Ranking:
    ranked: list[tuple[str, float]]
    suppressed_stale: int


DEFAULT_PARAMS = RankParams()


class MemoryIndex:
    """The tokenized documents of one project, kept searchable under single-document updates."""

    def __init__(self) -> None:
        self.bm25 = BM25Index()
        self.docs: dict[str, MemoryDoc] = {}
        self._slot_docs: list[MemoryDoc | None] = []
        self._facts_of: dict[str, set[str]] = {}
        self._episodes_of: dict[str, set[str]] = {}
        self._edges_of: dict[str, dict[str, str]] = {}  # entity -> fact key -> other entity
        self._streams: dict[str, dict[int, str]] = {}
        # Per-slot columns for visibility, kept in step with the documents (grown by doubling).
        self._arrays: dict[str, np.ndarray] = {
            "present": np.zeros(64, dtype=bool),
            "fact": np.zeros(64, dtype=bool),
            "recorded": np.full(64, INF),
            "start": np.full(64, -INF),
            "until": np.full(64, INF),
            "closed": np.full(64, INF),
            # Keys as a column so that ties are broken by key inside numpy.
            "key": np.full(64, "", dtype="<U64"),
        }

    def __len__(self) -> int:
        return len(self.docs)

    def upsert(self, doc: MemoryDoc) -> None:
        if doc.key in self.docs:
            self._unlink(self.docs[doc.key])
        slot = self.bm25.upsert(doc.key, doc.tokens)
        while len(self._slot_docs) <= slot:
            self._slot_docs.append(None)
        self._slot_docs[slot] = doc
        self.docs[doc.key] = doc
        if doc.kind == "fact" and doc.subject:
            self._facts_of.setdefault(doc.subject, set()).add(doc.key)
        if doc.kind == "episode":
            for entity in doc.entities:
                self._episodes_of.setdefault(entity, set()).add(doc.key)
        if doc.edge:
            a, b = doc.edge
            self._edges_of.setdefault(a, {})[doc.key] = b
            self._edges_of.setdefault(b, {})[doc.key] = a
        if doc.stream is not None and doc.position is not None:
            self._streams.setdefault(doc.stream, {})[doc.position] = doc.key
        self._set_columns(slot, doc)

    def _unlink(self, doc: MemoryDoc) -> None:
        if doc.subject:
            self._facts_of.get(doc.subject, set()).discard(doc.key)
        for entity in doc.entities:
            self._episodes_of.get(entity, set()).discard(doc.key)
        if doc.edge:
            for end in doc.edge:
                self._edges_of.get(end, {}).pop(doc.key, None)
        if doc.stream is not None and doc.position is not None:
            stream = self._streams.get(doc.stream, {})
            if stream.get(doc.position) == doc.key:
                del stream[doc.position]

    def subset(self, keep: Iterable[str]) -> MemoryIndex:
        """A new index over some of these documents (tokens are reused, not recomputed)."""
        other = MemoryIndex()
        for key in sorted(keep):
            other.upsert(self.docs[key])
        return other

    # -- visibility ----------------------------------------------------------------------

    def _set_columns(self, slot: int, doc: MemoryDoc) -> None:
        a = self._arrays
        if slot >= len(a["present"]):
            size = max(slot + 1, 2 * len(a["present"]))
            for name, column in a.items():
                grown = np.full(size, column.dtype.type(_FILL[name]))
                grown[: len(column)] = column
                a[name] = grown
        a["present"][slot] = True
        a["fact"][slot] = doc.kind == "fact"
        a["recorded"][slot] = doc.recorded_at
        a["start"][slot] = doc.valid_from
        a["until"][slot] = doc.valid_until
        a["closed"][slot] = doc.closed_at
        a["key"][slot] = doc.key

    def masks(self, visibility: Visibility) -> tuple[np.ndarray, np.ndarray]:
        """(visible, stale) per slot. Stale: a fact hidden because it had been closed."""
        n = self.bm25.n_slots
        a = {name: column[:n] for name, column in self._arrays.items()}
        fact, episode = a["fact"], a["present"] & ~a["fact"]
        if visibility.as_of is None and visibility.known_at is None:
            if visibility.now is None:
                open_now = a["until"] == INF
                stale = fact & ~open_now
            else:
                open_now = (a["start"] <= visibility.now) & (a["until"] > visibility.now)
                stale = fact & (a["until"] <= visibility.now)
            if visibility.include_superseded:
                return a["present"].copy(), np.zeros_like(stale)
            return episode | (fact & open_now), stale
        known = INF if visibility.known_at is None else visibility.known_at
        recorded = a["recorded"] <= known
        # A closure learned after ``known_at`` was not known then: the fact was still open.
        until = np.where(a["closed"] <= known, a["until"], INF)
        if visibility.as_of is None:
            fact_visible = fact & recorded & (until == INF)
            stale = fact & recorded & (until != INF)
            episode_visible = episode & recorded
        else:
            at = visibility.as_of
            if visibility.fact_keys is None:
                fact_visible = fact & recorded & (a["start"] <= at) & (until > at)
            else:
                chosen = np.zeros_like(fact)
                for key in visibility.fact_keys:
                    slot = self.bm25.slot(key)
                    if slot is not None:
                        chosen[slot] = True
                fact_visible = fact & recorded & chosen
            stale = fact & recorded & (a["start"] <= at) & ~fact_visible
            episode_visible = episode & recorded & (a["start"] <= at)
        if visibility.include_superseded:
            return (fact & recorded) | episode_visible, np.zeros_like(stale)
        return fact_visible | episode_visible, stale

    # -- ranking -------------------------------------------------------------------------

    def rank(
        self, query: str, visibility: Visibility, params: RankParams = DEFAULT_PARAMS
    ) -> Ranking:
        terms = tokenize_query(query) or [w.lower() for w in query.split() if w.strip()]
        boost = identifiers(query)
        if not self.docs or not terms:
            return Ranking(ranked=[], suppressed_stale=0)
        visible, stale = self.masks(visibility)
        dense = self.bm25.dense_scores(terms, boost_identifiers=boost)
        matched = self.bm25.matched_weight(terms)
        # Okapi BM25 gives a term found in half of the documents zero weight, which in a small
        # project is most terms: a match must still beat a miss, a rare match a common one.
        relevance = dense + 1e-2 * matched
        if params.coordination > 0:
            total = sum(self.bm25.smooth_idf(t) for t in set(terms))
            if total > 0:
                relevance = relevance * (matched / total) ** params.coordination
        suppressed = int(np.count_nonzero((matched > 0) & stale))
        relevance = np.where(visible, relevance, 0.0)

        # Everything after BM25 works on the best ``pool`` items, not on the whole corpus.
        pool = self._top_slots(relevance, params.pool)
        if not pool:
            return Ranking(ranked=[], suppressed_stale=suppressed)
        scores = {slot: float(relevance[slot]) for slot in pool}
        if params.prf_docs and params.prf_terms and params.prf_weight > 0:
            expansion = self._feedback_terms(pool[: params.prf_docs], terms, params)
            if expansion:
                slots = np.asarray(pool, dtype=np.int64)
                extra = np.zeros(len(pool))
                for term, weight in expansion:
                    extra += weight * self.bm25.term_scores(term, slots)
                scores = {
                    slot: scores[slot] + float(e) for slot, e in zip(pool, extra, strict=True)
                }

        top = self._best(scores, params.candidates)
        best = top[0][1]
        utility: dict[int, float] = {slot: value / best for slot, value in top}

        self._activate(utility, visible, params)
        self._stream_neighbours(utility, visible, params)

        ranked = sorted(
            ((self._slot_docs[s].key, u) for s, u in utility.items() if u > 0),  # type: ignore[union-attr]
            key=lambda pair: (-pair[1], pair[0]),
        )
        return Ranking(ranked=ranked, suppressed_stale=suppressed)

    def _feedback_terms(
        self, top: list[int], terms: list[str], params: RankParams
    ) -> list[tuple[str, float]]:
        query_terms = set(terms)
        weights: dict[str, float] = {}
        for slot in top:
            doc = self._slot_docs[slot]
            if doc is None:
                continue
            for term, tf in Counter(doc.tokens).items():
                if term not in query_terms:
                    weights[term] = weights.get(term, 0.0) + tf * self.bm25.idf(term)
        chosen = [(t, w) for t, w in sorted(weights.items(), key=lambda x: (-x[1], x[0])) if w > 0]
        chosen = chosen[: params.prf_terms]
        if not chosen:
            return []
        heaviest = chosen[0][1]
        return [(t, params.prf_weight * w / heaviest) for t, w in chosen]

    def _activate(self, utility: dict[int, float], visible: np.ndarray, params: RankParams) -> None:
        if params.hops <= 0 or params.activation_weight <= 0:
            return
        seeds: dict[str, float] = {}
        for slot, value in self._best(utility, params.seeds):
            doc = self._slot_docs[slot]
            if doc is None:
                continue
            for entity in doc.entities:
                seeds[entity] = max(seeds.get(entity, 0.0), value)
        if not seeds:
            return

        def neighbours(entity: str) -> list[str]:
            out = []
            for fact_key, other in self._edges_of.get(entity, {}).items():
                slot = self.bm25.slot(fact_key)
                if slot is not None and visible[slot]:
                    out.append(other)
            return out

        activation = spread_activation(
            seeds,
            neighbours,
            hops=params.hops,
            decay=params.decay,
            min_activation=params.activation_min,
            max_frontier=params.activation_frontier,
        )
        # Only the most activated entities lend relevance: in a dense graph two hops reach
        # most of it, and a bonus for everything is a bonus for nothing.
        strongest = sorted(
            ((e, v) for e, v in activation.items() if v >= params.activation_min),
            key=lambda pair: (-pair[1], pair[0]),
        )[: params.activated_max]
        for entity, value in strongest:
            bonus = params.activation_weight * value
            # Each item appears once per entity, and entities go in a fixed order, so the sums
            # do not depend on set iteration order.
            for key in self._facts_of.get(entity, set()) | self._episodes_of.get(entity, set()):
                item_slot = self.bm25.slot(key)
                if item_slot is None or not visible[item_slot]:
                    continue
                utility[item_slot] = utility.get(item_slot, 0.0) + bonus

    def _stream_neighbours(
        self, utility: dict[int, float], visible: np.ndarray, params: RankParams
    ) -> None:
        if params.stream_window <= 0 or params.stream_weight <= 0:
            return
        sources = self._best(utility, params.stream_sources)
        lent: dict[int, float] = {}
        for slot, value in sources:
            doc = self._slot_docs[slot]
            if doc is None or doc.stream is None or doc.position is None:
                continue
            stream = self._streams.get(doc.stream, {})
            for offset in range(1, params.stream_window + 1):
                for position, factor in (
                    (doc.position - offset, params.stream_backward),
                    (doc.position + offset, 1.0),
                ):
                    key = stream.get(position)
                    if key is None:
                        continue
                    neighbour = self.bm25.slot(key)
                    if neighbour is None or not visible[neighbour]:
                        continue
                    share = factor * params.stream_weight * value / offset
                    lent[neighbour] = max(lent.get(neighbour, 0.0), share)
        for slot, share in sorted(lent.items(), key=lambda x: self._key(x[0])):
            utility[slot] = utility.get(slot, 0.0) + share

    def _key(self, slot: int) -> str:
        doc = self._slot_docs[slot]
        return doc.key if doc is not None else ""

    def _ordered(self, slots: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``slots`` sorted by value (descending), ties by key: the order never depends on
        where a document happens to be stored."""
        order = np.lexsort((self._arrays["key"][slots], -values))
        return slots[order]

    def _best(self, utility: dict[int, float], n: int) -> list[tuple[int, float]]:
        if not utility or n <= 0:
            return []
        slots = np.fromiter(utility.keys(), dtype=np.int64, count=len(utility))
        values = np.fromiter(utility.values(), dtype=np.float64, count=len(utility))
        if len(slots) > n:
            threshold = np.partition(values, len(values) - n)[len(values) - n]
            keep = values >= threshold
            slots, values = slots[keep], values[keep]
        return [(int(s), utility[int(s)]) for s in self._ordered(slots, values)[:n]]

    def _top_slots(self, values: np.ndarray, n: int) -> list[int]:
        """Slots of the ``n`` largest positive values, best first, ties broken by key."""
        positive = np.flatnonzero(values > 0)
        if not len(positive) or n <= 0:
            return []
        if len(positive) > n:
            threshold = np.partition(values[positive], len(positive) - n)[len(positive) - n]
            positive = positive[values[positive] >= threshold]
        return self._ordered(positive, values[positive])[:n].tolist()
