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
# Beside a table ``X.npz``: ``X.neighbours.npz``, each term's neighbours above ``FLOOR``,
# computed from the table when it is saved (``neighbours_save``), so that no process computes
# them again; a table without it (or with one made for other vectors) computes them per term.
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


def neighbours_path(path: Path | str) -> Path:
    """Where the neighbours of the table at ``path`` are kept."""
    path = Path(path)
    return path.with_name(path.stem + ".neighbours.npz")


@dataclass(frozen=True)
class Neighbours:
    """Every term's ``_nearest`` at once: term ``i``'s rows and similarities are
    ``rows[offsets[i]:offsets[i + 1]]`` and ``sims[...]``, nearest first."""

    offsets: np.ndarray
    rows: np.ndarray
    sims: np.ndarray

    def of(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        return self.rows[start:end], self.sims[start:end]


class TermVectors:
    """Unit vectors by index term, and each term's nearest terms by cosine similarity."""

    def __init__(
        self, terms: list[str], vectors: np.ndarray, kept: Neighbours | None = None
    ) -> None:
        if vectors.ndim != 2 or vectors.shape[0] != len(terms):
            raise ValueError("vectors: one row per term expected")
        if any(a >= b for a, b in pairwise(terms)):
            raise ValueError("terms: distinct and in sorted order expected")
        self.terms = terms
        self.row = {term: i for i, term in enumerate(terms)}
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        #: Every term's neighbours, read from beside the table file (None: computed per term).
        self.kept = kept
        self._near: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def load(cls, path: Path | str) -> TermVectors:
        """The table at ``path``, with the neighbours kept beside it when they were computed
        from these vectors."""
        with np.load(path) as data:
            table = cls([str(t) for t in data["terms"]], data["vectors"])
        kept = neighbours_path(path)
        if kept.exists():
            with np.load(kept) as data:
                neighbours = Neighbours(data["offsets"], data["rows"], data["sims"])
            if table._made_here(neighbours):
                table.kept = neighbours
        return table

    def _made_here(self, neighbours: Neighbours) -> bool:
        """Whether ``neighbours`` were made from these vectors: one list per term, and a few
        terms' lists (first, last and two between) exactly what ``_nearest`` computes."""
        n = len(self)
        if len(neighbours.offsets) != n + 1:
            return False
        for row in sorted({0, n // 3, 2 * n // 3, n - 1}) if n else ():
            rows, sims = self._nearest_row(row)
            kept_rows, kept_sims = neighbours.of(row)
            if not (np.array_equal(rows, kept_rows) and np.array_equal(sims, kept_sims)):
                return False
        return True

    def save(self, path: Path | str) -> None:
        """Writes the table at ``path`` and its neighbours beside it."""
        np.savez_compressed(
            path, terms=np.array(self.terms), vectors=self.vectors.astype(np.float16)
        )
        # From the vectors as every process reads them (float16 in the file), so that the
        # neighbours kept are the very floats ``_nearest`` computes after a load.
        neighbours_save(TermVectors.load(path), neighbours_path(path))

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
        row = self.row.get(term)
        if row is not None and self.kept is not None:
            return self.kept.of(row)
        cached = self._near.get(term)
        if cached is None:
            cached = _NONE if row is None else self._nearest_row(row)
            self._near[term] = cached
        return cached

    def _nearest_row(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        sims = _similarities(self.vectors, self.vectors[row])
        sims[row] = -1.0  # not its own neighbour
        hit = np.flatnonzero(sims >= FLOOR)
        # Rows are in term order (the constructor checks it): a stable sort by similarity
        # breaks ties by term.
        hit = hit[np.argsort(-sims[hit], kind="stable")]
        return hit.astype(np.int32), sims[hit]

    def corpus_rows(self, terms: Iterable[str]) -> CorpusRows:
        """The rows of the table's terms among ``terms``, to look neighbours up among them."""
        rows = np.array(sorted({self.row[t] for t in terms if t in self.row}), dtype=np.int64)
        return CorpusRows(rows, np.ascontiguousarray(self.vectors[rows]))

    def _nearest_among(self, term: str, among: CorpusRows) -> tuple[np.ndarray, np.ndarray]:
        """``_nearest(term)`` restricted to ``among``'s rows: from the kept neighbours, or its
        cache when the term was looked up in the whole table before, else computed over those
        rows alone (a corpus holds a fraction of the table's terms); kept with ``among``, which
        queries reuse."""
        found = among.near.get(term)
        if found is not None:
            return found
        row = self.row.get(term)
        cached = self._near.get(term)
        if row is not None and self.kept is not None:
            cached = self.kept.of(row)
        if cached is not None:
            at = np.searchsorted(among.rows, cached[0]).clip(max=max(len(among.rows) - 1, 0))
            keep = among.rows[at] == cached[0] if len(among.rows) else np.zeros(0, dtype=bool)
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


def neighbours_save(table: TermVectors, path: Path | str) -> None:
    """Writes every term's neighbours above ``FLOOR`` in ``table`` (as ``_nearest`` finds
    them, the same floats) to ``path``, uncompressed: a process reads them in a few ms."""
    offsets, rows, sims = [0], [], []
    for row in range(len(table)):
        near_rows, near_sims = table._nearest_row(row)
        rows.append(near_rows)
        sims.append(near_sims)
        offsets.append(offsets[-1] + len(near_rows))
    np.savez(
        path,
        offsets=np.array(offsets, dtype=np.int64),
        rows=np.concatenate(rows) if rows else np.zeros(0, dtype=np.int32),
        sims=np.concatenate(sims) if sims else np.zeros(0, dtype=np.float32),
    )


@lru_cache(maxsize=4)
def term_vectors(path: str = str(DEFAULT_PATH)) -> TermVectors:
    """The table at ``path`` (the shipped one by default), loaded once per process."""
    return TermVectors.load(path)
