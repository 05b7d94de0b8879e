"""Ranking memory for a query: BM25, spreading activation, stream neighbours, visibility.

``MemoryIndex`` holds the project's tokenized documents (facts and episodes as plain
``MemoryDoc`` values) and keeps them searchable as they change, one document at a time.
``MemoryIndex.rank`` turns a query into a utility per document:

1. Okapi BM25 over the code-aware tokens, whole identifiers boosted (``bm25.py``); with
   related terms (``termvectors.py``, on in the dialogue profile) the corpus terms nearest in
   meaning to each query term add their BM25 score at a share of it, so an answer in other
   words ("Spain" for "European countries") is found too;
2. pseudo-relevance feedback: the most distinctive terms of the best few documents are added
   to the query at a lower weight, so words the query did not use but its best answers share
   still count;
3. spreading activation over visible edges (both directions, Cortex-style object values
   included), up to two hops, from the entities the query names (full strength) and those of
   its best documents (a share of their relevance): the items about the entities reached are
   relevant by activation x salience (invariants, decisions and bug causes first), beside their
   relevance by words, surfacing what the query did not name (``activation.py``);
4. stream neighbours: an episode that is part of a stream (a conversation, a migration log)
   lends part of its relevance to the episodes just before and after it, which often hold the
   answer to the question it raised or the context it relies on.

Visibility is decided per request: live (active facts, every episode), history included, or
bi-temporal time travel (valid at ``as_of`` as known at ``known_at``). Matching facts that are
hidden because they were superseded or closed are counted as suppressed. A query asking what
changed since a day keeps only part of the relevance of older items. The documents, their entity
graph and visibility columns are ``memory_store.py``'s. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np

from graph_app.domain.activation import spread_activation
from graph_app.domain.activation import strongest as by_strength
from graph_app.domain.memory_doc import MemoryDoc
from graph_app.domain.memory_store import MemoryStore, Visibility
from graph_app.domain.postings import index_of
from graph_app.domain.ranking_params import DEFAULT_PARAMS, RankParams
from graph_app.domain.related_terms import FIXED_TERMS, related_shares
from graph_app.domain.selection import nth_largest
from graph_app.domain.termvectors import CorpusRows, TermVectors, term_vectors
from graph_app.domain.tokenize import (
    identifiers,
    plain_words,
    query_words,
    since_date,
    stem,
    tokenize_query,
)


@dataclass(frozen=True)
class Ranking:
    ranked: list[tuple[str, float]]
    suppressed_stale: int
    # The query's terms as ranked (a derived word form read as its known stem).
    terms: tuple[str, ...] = ()
    # The related terms it was also read as, with their share of a query term's weight.
    related: tuple[tuple[str, float], ...] = ()
    # The storage slot of each ranked item, in ``ranked``'s order.
    slots: tuple[int, ...] = ()


class MemoryIndex(MemoryStore):
    """The tokenized documents of one project, kept searchable under single-document updates:
    ``rank`` turns a query into a utility per visible document."""

    def subset(self, keep: Iterable[str]) -> MemoryIndex:
        """A new index over some of these documents (tokens are reused, not recomputed)."""
        other = MemoryIndex()
        for key in sorted(keep):
            other.upsert(self.docs[key])
        return other

    # -- ranking -------------------------------------------------------------------------

    def rank(
        self,
        query: str,
        visibility: Visibility,
        params: RankParams = DEFAULT_PARAMS,
        limit: int | None = None,
        query_vector: np.ndarray | None = None,
    ) -> Ranking:
        """The visible items relevant to ``query``, best first (``limit``: only that many).
        ``query_vector``: the query's sentence vector, fused with BM25 when the documents have
        theirs (the semantic backend)."""
        terms = tokenize_query(query, drop=params.drop) or [
            w.lower() for w in query.split() if w.strip()
        ]
        if not self.docs or not terms:
            return Ranking(ranked=[], suppressed_stale=0)
        terms = self._derived(query, terms, params)
        visible, stale = self.masks(visibility)
        relevance, matched = self._lexical(query, terms, params)
        suppressed = int(np.count_nonzero(stale[matched]))
        related = self._related(terms, params)
        if related:
            relevance = self._with_related(relevance, related, params)
        relevance *= visible  # in place: ``_lexical`` and ``_with_related`` answer new arrays
        shares = related_shares(related, params.related_weight)

        # Everything after BM25 works on the best ``pool`` items, not on the whole corpus (in
        # no particular order: what follows orders them by its own scores).
        pool = self._top_set(relevance, params.pool).tolist()
        lexical = len(pool)
        similar: dict[int, float] = {}
        if query_vector is not None and params.semantic_weight > 0 and len(self.dense):
            similar = self._similar(query_vector, visible, params)
            pooled = set(pool)
            pool += [slot for slot in similar if slot not in pooled]
        named = self._named_entities(query)
        if not pool and not named:
            return Ranking(
                ranked=[], suppressed_stale=suppressed, terms=tuple(terms), related=shares
            )
        pooled_at = np.asarray(pool, dtype=np.int64)
        scores = self._with_feedback(pooled_at, lexical, terms, relevance, params)
        if similar:
            scores = self._fuse_dense(pooled_at, scores, similar, params)
        # The candidates, in no particular order (the utilities are ordered at the end).
        chosen = self._largest_at(pooled_at, scores, params.candidates)
        top_slots, top_values = pooled_at[chosen], scores[chosen]
        best = float(top_values.max()) if len(top_values) else 1.0
        utility = dict(zip(top_slots.tolist(), (top_values / best).tolist(), strict=True))

        shown = self.shown(visible)
        # The best items seed activation.
        seeds = self._largest(top_slots, top_values, params.seeds)
        self._activate(utility, seeds, shown, named, params)
        self._stream_neighbours(utility, shown, params)
        self._prefer_titled(utility, terms, params)
        since = since_date(query) if params.before_since < 1 else None
        if since is not None:
            self._prefer_since(utility, since, params)
        slots = self._ranked(utility, limit)
        key_at = self.bm25._keys
        return Ranking(
            ranked=[(key_at[s], utility[s]) for s in slots],  # type: ignore[misc]
            suppressed_stale=suppressed,
            terms=tuple(terms),
            related=shares,
            slots=tuple(slots),
        )

    def _ranked(self, utility: dict[int, float], limit: int | None) -> list[int]:
        """The slots of the (``limit`` best) items with a positive utility, best first, ties
        by ``tie_key``."""
        return self._top(utility, len(utility) if limit is None else limit, positive=True)

    def _lexical(
        self, query: str, terms: list[str], params: RankParams
    ) -> tuple[np.ndarray, np.ndarray]:
        """(relevance per slot, the slots that match a query term): BM25 with whole identifiers
        boosted, weighted by how much of the query each item covers."""
        dense = self.bm25.dense_scores(
            terms, boost_identifiers=identifiers(query), b=params.length_norm
        )
        table = self.bm25.match_table(terms)
        total = sum(self.bm25.smooth_idf(t) for t in sorted(set(terms)))
        if table is not None and params.coordination > 0 and total > 0:
            # Only the slots holding a query term get a coverage above zero (a slot holding none
            # has mask 0, whose coverage is 0.0): worked out over the whole corpus at once, each
            # slot's weight and coverage taken from the masks' small tables, about a third
            # faster than gathering the matching slots first (at 100k facts, where a query's
            # terms are in four documents of ten), the same floats.
            mask, sums = table
            held = index_of(mask)
            weight = sums.take(held)
            # Okapi BM25 gives a term found in half of the documents zero weight, which in a
            # small project is most terms: a match must still beat a miss, a rare match a
            # common one.
            cover = (sums / total) ** params.coordination
            matched = (weight > 0).nonzero()[0]
            # (dense + 1e-2 x weight) x cover, in place: the same floats (a sum in either order).
            relevance = weight * 1e-2
            relevance += dense
            relevance *= cover.take(held)
            return relevance, matched
        matched = self.bm25.matched_weight(terms) if table is None else table[1][table[0]]
        relevance = dense + 1e-2 * matched
        if params.coordination > 0 and total > 0:
            # Zero where no query term matched: the rest is computed on the matches only.
            hit = (matched != 0).nonzero()[0]
            covered = np.zeros(len(relevance))
            covered[hit] = relevance[hit] * (matched[hit] / total) ** params.coordination
            relevance = covered
        return relevance, (matched > 0).nonzero()[0]

    def _related(
        self, terms: list[str], params: RankParams
    ) -> list[tuple[str, list[tuple[str, float]]]]:
        """Each distinct query term with the corpus terms nearest to it in meaning (none for a
        title term, none that is a query or a title term itself)."""
        if params.related_weight <= 0:
            return []
        table = term_vectors()
        query = set(terms)
        titled = self._titled

        def excluded(term: str) -> bool:
            return term in query or term in titled or term in FIXED_TERMS

        among = self._corpus_rows(table)
        out = []
        for term in sorted(query):
            if term in titled or term in FIXED_TERMS:
                continue
            near = table.neighbours(
                term,
                known=self.bm25.document_frequency,
                min_similarity=params.related_min,
                limit=params.related_terms,
                exclude=excluded,
                among=among,
            )
            if near:
                out.append((term, near))
        return out

    def _corpus_rows(self, table: TermVectors) -> CorpusRows:
        """The table's rows of this index's terms, made again when its terms change."""
        made = self._corpus
        if made is None or made[0] != self.bm25.vocabulary or made[1] is not table:
            made = self._corpus = (
                self.bm25.vocabulary,
                table,
                table.corpus_rows(self.bm25.terms()),
            )
        return made[2]

    def _with_related(
        self,
        relevance: np.ndarray,
        related: list[tuple[str, list[tuple[str, float]]]],
        params: RankParams,
    ) -> np.ndarray:
        """``relevance`` plus, per query term, the best of its related terms' BM25 scores
        weighted by similarity (one related word found is enough; several do not add up)."""
        extra = np.zeros(len(relevance))
        for _term, near in related:
            best = np.zeros(len(relevance))
            for other, similarity in near:
                # A term's BM25 scores are its contribution on the slots holding it (each once)
                # and zero elsewhere: only those slots can raise the best.
                found = self.bm25.contribution(other, params.length_norm)
                if found is not None:
                    slots, scores = found
                    at = index_of(slots)
                    best[at] = np.maximum(best[at], similarity * scores)
            extra += best
        return relevance + params.related_weight * extra

    def _similar(
        self, query: np.ndarray, visible: np.ndarray, params: RankParams
    ) -> dict[int, float]:
        """The ``semantic_candidates`` visible items most similar to the query vector, each
        with its similarity scaled from 1 (the most similar) down to 0 (the last of them)."""
        similarity = self.dense.similarity(query, len(visible)) * visible
        chosen = self._top_slots(similarity, params.semantic_candidates)
        if not chosen:
            return {}
        values = similarity[chosen]
        top, floor = float(values[0]), float(values[-1])
        scaled = (values - floor) / (top - floor) if top > floor else np.ones(len(values))
        return dict(zip(chosen, scaled.tolist(), strict=True))

    def _fuse_dense(
        self,
        slots: np.ndarray,
        scores: np.ndarray,
        similar: dict[int, float],
        params: RankParams,
    ) -> np.ndarray:
        """The lexical ``scores`` (BM25 with feedback) of the pool's ``slots``, each similar
        item's plus its scaled similarity x ``semantic_weight`` x the best lexical score: a
        turn in other words can rank among the best, one that matches both ways rises above
        those matching one way. Every similar item is in the pool."""
        peak = float(scores.max()) if len(scores) else 0.0
        scale = params.semantic_weight * (peak if peak > 0 else 1.0)
        fused = scores.copy()
        at = {slot: i for i, slot in enumerate(slots.tolist())}
        for slot, share in similar.items():
            fused[at[slot]] += scale * share
        return fused

    def _derived(self, query: str, terms: list[str], params: RankParams) -> list[str]:
        """``terms`` with the stem of each unknown word of the query that extends a known stem
        replaced by the longest such stem (at least five letters)."""
        if params.derived_min <= 0:
            return terms
        known = self.bm25.document_frequency
        found: dict[str, str] = {}
        for word in plain_words(query):
            term = stem(word)
            if len(word) < params.derived_min or term in found or known(term):
                continue
            shortest = max(5, len(term) - params.derived_extra)
            for size in range(len(term) - 1, shortest - 1, -1):
                if term[:size] not in params.drop and known(term[:size]):
                    found[term] = term[:size]
                    break
        return [found.get(t, t) for t in terms] if found else terms

    def _with_feedback(
        self,
        slots: np.ndarray,
        lexical: int,
        terms: list[str],
        relevance: np.ndarray,
        params: RankParams,
    ) -> np.ndarray:
        """Scores of the pool's ``slots``, with the most distinctive terms of its best items
        added to the query at a lower weight (pseudo-relevance feedback)."""
        base = relevance[slots]
        if not (len(slots) and params.prf_docs and params.prf_terms and params.prf_weight > 0):
            return base
        # Feedback comes from the best items by words, the first ``lexical`` of the pool (an
        # item found only by its sentence vector, appended to it, shares no query word to vouch
        # for its others).
        words = slots[:lexical]
        best = self._largest(words, relevance[words], params.prf_docs)
        sources = [s for s in best if relevance[s] > 0]
        expansion = self._feedback_terms(sources, terms, params)
        if not expansion:
            return base
        return base + self.bm25.weighted_scores(expansion, slots, b=params.length_norm)

    def _named_entities(self, query: str) -> list[str]:
        """The entities of the graph the query names (whole words or identifiers)."""
        found = []
        for word in query_words(query):
            if word not in found and self.is_entity(word):
                found.append(word)
        return found

    def _prefer_titled(
        self, utility: dict[int, float], terms: list[str], params: RankParams
    ) -> None:
        """A query naming the title of some items (a speaker): items titled otherwise matter
        less."""
        if params.title_prior <= 0:
            return
        named = {t for t in terms if self._titled.get(t)}
        if not named:
            return
        keep = 1.0 - params.title_prior
        docs, other = self._slot_docs, named.isdisjoint
        for slot, value in utility.items():
            doc = docs[slot]
            if doc is not None and other(doc.title_terms):
                utility[slot] = value * keep

    def _prefer_since(self, utility: dict[int, float], since: date, params: RankParams) -> None:
        """A query asking what changed since a day: items from before it matter less."""
        start = datetime(since.year, since.month, since.day, tzinfo=UTC).timestamp()
        for slot in list(utility):
            doc = self._slot_docs[slot]
            if doc is not None and doc.valid_from < start:
                utility[slot] *= params.before_since

    def _feedback_terms(
        self, top: list[int], terms: list[str], params: RankParams
    ) -> list[tuple[str, float]]:
        query_terms = set(terms)
        weights: dict[str, float] = {}
        idf = self.bm25.idf_table().get
        self.docs_ahead(top)
        for slot in top:
            doc = self._slot_docs[slot]
            if doc is None:
                continue
            for term, tf in Counter(doc.tokens).items():
                if term not in query_terms:
                    weights[term] = weights.get(term, 0.0) + tf * idf(term, 0.0)
        # The heaviest first (ties by term); the positive ones come before any other.
        first = heapq.nsmallest(params.prf_terms, weights.items(), key=lambda x: (-x[1], x[0]))
        chosen = [(t, w) for t, w in first if w > 0]
        if not chosen:
            return []
        heaviest = chosen[0][1]
        return [(t, params.prf_weight * w / heaviest) for t, w in chosen]

    def _activate(
        self,
        utility: dict[int, float],
        best: list[int],
        visible: bytes,
        named: list[str],
        params: RankParams,
    ) -> None:
        """Spreading activation from the entities the query names and those of its ``best``
        items; the items about the entities reached gain relevance by activation x salience."""
        if params.hops <= 0 or params.activation_weight <= 0:
            return
        seeds = self._seeds(utility, best, named, params)
        if not seeds:
            return
        activation = spread_activation(
            seeds,
            self.neighbours_seen(visible),
            hops=params.hops,
            decay=params.decay,
            min_activation=params.activation_min,
            max_frontier=params.activation_frontier,
        )
        # Only the most activated entities lend relevance: in a dense graph two hops reach
        # most of it, and a bonus for everything is a bonus for nothing.
        strongest = by_strength(
            ((e, v) for e, v in activation.items() if v >= params.activation_min),
            params.activated_max,
        )
        # Relevance by the graph stands beside relevance by words, it does not add to it: an item
        # near the query's entities that also shares its words is not found twice.
        for slot, bonus in self._lent(strongest, visible, params).items():
            if bonus > utility.get(slot, 0.0):
                utility[slot] = bonus

    def _seeds(
        self, utility: dict[int, float], best: list[int], named: list[str], params: RankParams
    ) -> dict[str, float]:
        """Activation seeds: the entities the query names at full strength, those of its
        ``best`` items at a share of the item's relevance."""
        seeds: dict[str, float] = {node: params.named_seed for node in named}
        self.docs_ahead(best)
        for slot in best:
            value = utility[slot]
            doc = self._slot_docs[slot]
            if doc is None:
                continue
            for node in self._nodes_of(doc):
                seeds[node] = max(seeds.get(node, 0.0), params.item_seed * value)
        return seeds

    def _lent(
        self, strongest: list[tuple[str, float]], visible: bytes, params: RankParams
    ) -> dict[int, float]:
        """The relevance each visible item gets from the activated entities it is about: the
        strongest one's (a hub's items do not pile up bonuses), when sharpening would not erase
        it."""
        lent: dict[int, float] = {}
        bonus_min = params.bonus_min
        for entity, value in strongest:
            strength = params.activation_weight * value
            if strength < bonus_min:
                break  # strongest first: the rest lend even less
            for item_slot, salience in self.items_seen(entity, visible):
                bonus = strength * salience
                if bonus >= bonus_min and bonus > lent.get(item_slot, 0.0):
                    lent[item_slot] = bonus
        return lent

    def _nodes_of(self, doc: MemoryDoc) -> list[str]:
        """The entities an item is about: its subject, its edge's ends, the entities it lists
        and the ones it names."""
        nodes = [e.lower() for e in doc.entities]
        if doc.object_ref and self.is_entity(doc.object_ref):
            nodes.append(doc.object_ref)
        nodes.extend(m for m in doc.mentions if self.is_entity(m))
        return nodes

    def _stream_neighbours(
        self, utility: dict[int, float], visible: bytes, params: RankParams
    ) -> None:
        if params.stream_window <= 0 or params.stream_weight <= 0:
            return
        sources = self._best_set(utility, params.stream_sources)
        # Each step's weight and offset (a neighbour's share there), in ``_stream_near``'s order.
        steps = [
            (factor * params.stream_weight, offset)
            for offset in range(1, params.stream_window + 1)
            for factor in (params.stream_backward, 1.0)
        ]
        near = self._stream_near
        lent: dict[int, float] = {}
        for slot, value in sources:
            found = near(slot, params.stream_window)
            for neighbour, step in found:
                if not visible[neighbour]:
                    continue
                weight, offset = steps[step]
                lent[neighbour] = max(lent.get(neighbour, 0.0), weight * value / offset)
        # Each slot is lent to once (the max above), so the order of these additions cannot
        # change a sum.
        for slot, share in lent.items():
            utility[slot] = utility.get(slot, 0.0) + share

    def _ordered(self, slots: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
        """The positions in ``slots`` of its first ``n`` sorted by value (descending), ties by
        ``tie_key``: the order never depends on where a document happens to be stored, nor on
        its id. The key's valid time and digest prefix are columns, sorted with the values at
        once; whole keys are made only for documents equal in all three."""
        order = (-values).argsort(kind="stable")
        ordered = values[order]
        if len(order) < 2 or not (ordered[1:] == ordered[:-1]).any():
            return order[:n]  # no two values equal: the values alone decide
        a = self._arrays
        newest, prefix = -a["start"][slots], a["tie"][slots]
        order = np.lexsort((prefix, newest, -values))
        if len(order) < 2:
            return order[:n]
        value, newest, prefix = values[order], newest[order], prefix[order]
        same = (value[1:] == value[:-1]) & (newest[1:] == newest[:-1]) & (prefix[1:] == prefix[:-1])
        if not same.any():
            return order[:n]
        flags = np.concatenate(([False], same, [False])).astype(np.int8)
        edges = np.diff(flags).nonzero()[0].tolist()
        ties = self._ties
        for first, last in zip(edges[::2], edges[1::2], strict=True):
            if first >= n:
                break  # runs past the first n do not change them
            run = order[first : last + 1].tolist()
            order[first : last + 1] = sorted(run, key=lambda i: ties[int(slots[i])])
        return order[:n]

    def _best_set(self, utility: dict[int, float], n: int) -> list[tuple[int, float]]:
        """The ``n`` best utilities with their slots, in no particular order."""
        if not utility or n <= 0:
            return []
        slots, values = _arrays_of(utility)
        return [(s, utility[s]) for s in self._largest_set(slots, values, n).tolist()]

    def _top(self, utility: dict[int, float], n: int, *, positive: bool = False) -> list[int]:
        """The slots of the ``n`` best utilities (``positive``: only those above 0), best
        first, ties by ``tie_key``."""
        if not utility or n <= 0:
            return []
        slots, values = _arrays_of(utility)
        if positive:
            keep = values > 0
            slots, values = slots[keep], values[keep]
        return self._largest(slots, values, n)

    def _top_slots(self, values: np.ndarray, n: int) -> list[int]:
        """Slots of the ``n`` largest positive values, best first, ties by ``tie_key``."""
        positive = (values > 0).nonzero()[0]
        return self._largest(positive, values[positive], n)

    def _top_set(self, values: np.ndarray, n: int) -> np.ndarray:
        """The slots of ``_top_slots`` in no particular order (ordering them costs more than
        choosing them)."""
        positive = (values > 0).nonzero()[0]
        return self._largest_set(positive, values[positive], n)

    def _largest_set(self, slots: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
        """The ``n`` of ``slots`` with the largest ``values`` (ties by ``tie_key``, as
        ``_largest``), in no particular order."""
        return slots[self._largest_at(slots, values, n)]

    def _largest_at(self, slots: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
        """The positions in ``slots`` of ``_largest_set``'s: only those equal to the last one
        chosen are put in order."""
        if not len(slots) or n <= 0:
            return np.zeros(0, dtype=np.int64)
        if len(slots) <= n:
            return np.arange(len(slots))
        threshold = nth_largest(values, n)
        above = values > threshold
        at = (values == threshold).nonzero()[0]
        wanted = n - int(np.count_nonzero(above))
        return np.concatenate(
            (above.nonzero()[0], at[self._ordered(slots[at], values[at], wanted)])
        )

    def _largest(self, slots: np.ndarray, values: np.ndarray, n: int) -> list[int]:
        """The ``n`` of ``slots`` with the largest ``values``, best first, ties by ``tie_key``."""
        slots, values = self._largest_pairs(slots, values, n)
        return slots.tolist()

    def _largest_pairs(
        self, slots: np.ndarray, values: np.ndarray, n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``_largest``'s slots with their values: ``_largest_at``'s, put in order."""
        chosen = self._largest_at(slots, values, n)
        slots, values = slots[chosen], values[chosen]
        at = self._ordered(slots, values, n)
        return slots[at], values[at]


def _arrays_of(utility: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """The slots and the values of ``utility`` as arrays, in its order."""
    slots = np.fromiter(utility.keys(), dtype=np.int64, count=len(utility))
    values = np.fromiter(utility.values(), dtype=np.float64, count=len(utility))
    return slots, values
