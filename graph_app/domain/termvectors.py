"""Related index terms: static word vectors keyed by the tokenizer's stems.

A question and its answer often share no word: "What European countries has Maria been to?" is
answered by "I took this pic in Spain", "What pets does Nate have?" by a turn about his turtles.
BM25 cannot see that. A table of one vector per index term (the Snowball stem ``tokenize``
makes) lets the ranker read a query term as also meaning the few terms of the corpus nearest to
it ("countri" -> "england", "spain"; "puppi" -> "pup", "dog"), at a share of their weight.

The table is static data, made once from a sentence-embedding model (``distill_term_vectors``,
see ``graph_app/domain/distill.py``) and shipped with the product: ranking only looks vectors up
and takes dot products, no model runs at query time. Vectors are unit length, stored as
float16 and computed with as float32. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

import numpy as np

# The table shipped with the product (made by ``manage.py distill_term_vectors``).
DEFAULT_PATH = Path(__file__).resolve().parent.parent / "data" / "term_vectors.npz"
# Neighbours are looked up among the table's terms above this similarity, then filtered to the
# terms a corpus holds; a query's call asks for as high or higher (``RankParams.related_min``).
FLOOR = 0.4
_NONE = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32))


def _similarities(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Each row of ``matrix`` dotted with ``vector``, row by row: a row's similarity is the same
    float whichever other rows are in the matrix (a BLAS product's may differ in the last bit)."""
    return np.einsum("ij,j->i", matrix, vector)


@dataclass(frozen=True)
class CorpusRows:
    """The table's rows of one corpus's terms (ascending) and their vectors, and the neighbours
    among them of each term looked up so far (the same for as long as the rows are)."""

    rows: np.ndarray
    vectors: np.ndarray
    near: dict[str, tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, compare=False, repr=False
    )


class TermVectors:
    """Unit vectors by index term, and each term's nearest terms by cosine similarity."""

    def __init__(self, terms: list[str], vectors: np.ndarray) -> None:
        if vectors.ndim != 2 or vectors.shape[0] != len(terms):
            raise ValueError("vectors: one row per term expected")
        if any(a >= b for a, b in pairwise(terms)):
            raise ValueError("terms: distinct and in sorted order expected")
        self.terms = terms
        self.row = {term: i for i, term in enumerate(terms)}
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._near: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def load(cls, path: Path | str) -> TermVectors:
        with np.load(path) as data:
            return cls([str(t) for t in data["terms"]], data["vectors"])

    def save(self, path: Path | str) -> None:
        np.savez_compressed(
            path, terms=np.array(self.terms), vectors=self.vectors.astype(np.float16)
        )

    def __contains__(self, term: str) -> bool:
        return term in self.row

    def __len__(self) -> int:
        return len(self.terms)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two terms (0.0 when either has no vector)."""
        i, j = self.row.get(a), self.row.get(b)
        if i is None or j is None:
            return 0.0
        return float(self.vectors[i] @ self.vectors[j])

    def _nearest(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, similarities) of the table's terms above the floor similarity to ``term``,
        nearest first (ties by term), without the term itself; computed once per term and kept
        as arrays (a few bytes a neighbour, whatever a long-lived process is asked)."""
        cached = self._near.get(term)
        if cached is None:
            row = self.row.get(term)
            if row is None:
                cached = _NONE
            else:
                sims = _similarities(self.vectors, self.vectors[row])
                sims[row] = -1.0  # not its own neighbour
                hit = np.flatnonzero(sims >= FLOOR)
                # Rows are in term order (the constructor checks it): a stable sort by
                # similarity breaks ties by term.
                hit = hit[np.argsort(-sims[hit], kind="stable")]
                cached = (hit.astype(np.int32), sims[hit])
            self._near[term] = cached
        return cached

    def corpus_rows(self, terms: Iterable[str]) -> CorpusRows:
        """The rows of the table's terms among ``terms``, to look neighbours up among them."""
        rows = np.array(sorted({self.row[t] for t in terms if t in self.row}), dtype=np.int64)
        return CorpusRows(rows, np.ascontiguousarray(self.vectors[rows]))

    def _nearest_among(self, term: str, among: CorpusRows) -> tuple[np.ndarray, np.ndarray]:
        """``_nearest(term)`` restricted to ``among``'s rows: from its cache when the term was
        looked up in the whole table before, else computed over those rows alone (a corpus
        holds a fraction of the table's terms); kept with ``among``, which queries reuse."""
        found = among.near.get(term)
        if found is not None:
            return found
        cached = self._near.get(term)
        row = self.row.get(term)
        if cached is not None:
            keep = np.isin(cached[0], among.rows)
            found = cached[0][keep], cached[1][keep]
        elif row is None:
            found = _NONE
        else:
            sims = _similarities(among.vectors, self.vectors[row])
            hit = np.flatnonzero((sims >= FLOOR) & (among.rows != row))
            hit = hit[np.argsort(-sims[hit], kind="stable")]
            found = among.rows[hit].astype(np.int32), sims[hit]
        if row is not None:  # bounded by the table's terms
            among.near[term] = found
        return found

    def near(self, term: str) -> tuple[tuple[str, float], ...]:
        """The table's terms above the floor similarity to ``term``, nearest first (ties by
        term), without the term itself."""
        rows, sims = self._nearest(term)
        terms = self.terms
        return tuple((terms[i], s) for i, s in zip(rows.tolist(), sims.tolist(), strict=True))

    def neighbours(
        self,
        term: str,
        *,
        known: Callable[[str], object],
        min_similarity: float,
        limit: int,
        exclude: Callable[[str], object] = lambda _t: False,
        among: CorpusRows | None = None,
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` terms nearest to ``term`` with a similarity of at least
        ``min_similarity`` (not below ``FLOOR``: nothing under it is kept) that ``known``
        accepts (a corpus's own terms) and ``exclude`` does not, nearest first. ``among``: the
        corpus's rows (``corpus_rows``), which hold every term ``known`` accepts: the same
        answer, computed over fewer rows."""
        if min_similarity < FLOOR:
            raise ValueError(f"min_similarity: must be at least {FLOOR}")
        rows, sims = self._nearest(term) if among is None else self._nearest_among(term, among)
        terms = self.terms
        out: list[tuple[str, float]] = []
        for i, sim in zip(rows.tolist(), sims.tolist(), strict=True):
            if sim < min_similarity or len(out) >= limit:
                break
            other = terms[i]
            if known(other) and not exclude(other):
                out.append((other, sim))
        return out


@lru_cache(maxsize=4)
def term_vectors(path: str = str(DEFAULT_PATH)) -> TermVectors:
    """The table at ``path`` (the shipped one by default), loaded once per process."""
    return TermVectors.load(path)
