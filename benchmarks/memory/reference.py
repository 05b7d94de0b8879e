"""A plain in-memory context compiler: the yardstick the benchmark compares ours to.

The design Cortex describes for its dict graph, written as simply as it can be while doing
the same job over the same documents: Okapi BM25 over the same item texts and tokens (a dict
of postings, scored in pure Python), two-hop spreading activation over a dict adjacency from
the entities the query names and those of the best matches (with the product's bounds on how
far it fans out), and greedy packing by utility per
token under the same budget, counted with the same tokenizer (each line once when indexed, the
final markdown at the end). It holds everything in dicts built once and has no database, no
revisions, no time travel, no previews and no receipts: what it costs is the floor of a compile
over that corpus. Pure Python: no Django import.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from graph_app.domain.activation import spread_activation
from graph_app.domain.bm25 import EPSILON, K1, B, okapi_idf
from graph_app.domain.tokenize import identifiers, tokenize_query

TITLE = "# Memory context"
SEEDS = 5  # best matches whose entities seed activation
HOPS = 2
DECAY = 0.5
ITEM_SEED = 0.3  # a match's entities seed at this share of its normalised score
ACTIVATION_WEIGHT = 0.5  # utility lent to an item about an activated entity
# The same bounds as the product's ranking (graph_app/domain/ranking_params.py RankParams): on a
# dense graph two hops reach nearly every entity, and lending to all their items is the whole
# corpus; with equal bounds the two do the same work and the ratio measures the implementation.
FRONTIER = 12  # most activated nodes that spread further at each hop
ACTIVATED = 24  # most activated entities whose items get the activation
CANDIDATES = 400  # densest items considered for packing (an 800-token bundle holds ~30)


@dataclass(frozen=True)
class RefDoc:
    """One fact or episode as the reference holds it."""

    key: str
    tokens: tuple[str, ...]
    entities: tuple[str, ...]  # lower-cased entity ids the item is about
    edge: tuple[str, str] | None  # a fact whose object is an entity
    line: str  # the cited line a bundle shows
    live: bool  # an open fact or any episode: what a live compile may show


@dataclass(frozen=True)
class RefResult:
    markdown: str
    token_count: int
    keys: list[str]


class ReferenceIndex:
    """Postings, lengths, adjacency and lines in dicts, built once from ``docs``."""

    def __init__(self, docs: Iterable[RefDoc], *, count: Callable[[str], int]) -> None:
        self.count = count
        self.docs: list[RefDoc] = list(docs)
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.adjacency: dict[str, set[str]] = defaultdict(set)
        self.items_of: dict[str, list[int]] = defaultdict(list)
        self.line_tokens: list[int] = []
        lengths: list[int] = []
        for number, doc in enumerate(self.docs):
            for term, tf in Counter(doc.tokens).items():
                self.postings[term].append((number, tf))
            lengths.append(len(doc.tokens))
            self.line_tokens.append(count(doc.line) + 1)  # with its newline
            if not doc.live:
                continue
            for entity in doc.entities:
                self.items_of[entity].append(number)
            if doc.edge is not None:
                a, b = doc.edge
                self.adjacency[a].add(b)
                self.adjacency[b].add(a)
        average = sum(lengths) / len(lengths) if lengths else 1.0
        self.norm = [K1 * (1 - B + B * length / (average or 1.0)) for length in lengths]
        frequencies = {term: len(self.postings[term]) for term in sorted(self.postings)}
        self.idf = okapi_idf(len(self.docs), frequencies, EPSILON)

    def scores(self, terms: list[str]) -> dict[int, float]:
        """BM25 of every live document holding a query term."""
        scores: dict[int, float] = defaultdict(float)
        docs, norm = self.docs, self.norm
        for term in terms:
            idf = self.idf.get(term, 0.0)
            for number, tf in self.postings.get(term, ()):
                if docs[number].live:
                    scores[number] += idf * tf * (K1 + 1) / (tf + norm[number])
        return scores

    def rank(self, query: str) -> dict[int, float]:
        """Utility per document: BM25 normalised to the best match, or the activation of an
        entity it is about, whichever is higher."""
        scores = self.scores(tokenize_query(query))
        best = max(scores.values(), default=0.0) or 1.0
        utility = {number: score / best for number, score in scores.items()}
        seeds = {name: 1.0 for name in identifiers(query) if name in self.adjacency}
        for number, value in heapq.nlargest(SEEDS, utility.items(), key=lambda pair: pair[1]):
            for entity in self.docs[number].entities:
                seeds[entity] = max(seeds.get(entity, 0.0), ITEM_SEED * value)
        activation = spread_activation(
            seeds,
            lambda node: self.adjacency.get(node, ()),
            hops=HOPS,
            decay=DECAY,
            max_frontier=FRONTIER,
        )
        strongest = heapq.nlargest(ACTIVATED, activation.items(), key=lambda pair: pair[1])
        for entity, value in strongest:
            lent = ACTIVATION_WEIGHT * value
            for number in self.items_of.get(entity, ()):
                if lent > utility.get(number, 0.0):
                    utility[number] = lent
        return utility

    def compile(self, query: str, max_tokens: int) -> RefResult:
        """The best lines by utility per token that fit ``max_tokens`` with the title."""
        utility, tokens = self.rank(query), self.line_tokens
        # Only the densest few can fit: a partial selection, not a sort of every match.
        by_density = heapq.nlargest(
            CANDIDATES, utility.items(), key=lambda pair: pair[1] / tokens[pair[0]]
        )
        remaining = max_tokens - self.count(TITLE)
        chosen: list[int] = []
        for number, _ in by_density:
            cost = tokens[number]
            if cost <= remaining:
                chosen.append(number)
                remaining -= cost
            if remaining <= 0:
                break
        while True:
            markdown = "\n".join([TITLE, *(self.docs[n].line for n in chosen)])
            total = self.count(markdown)
            if total <= max_tokens or not chosen:
                return RefResult(markdown, total, [self.docs[n].key for n in chosen])
            chosen.pop()
