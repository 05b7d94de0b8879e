"""Each term's neighbours in the related-terms table are computed once, when the table is
saved, and read by every process: the same terms and the same floats a process would compute,
ignored when they were made for other vectors."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from graph_app.domain.termvectors import (
    DEFAULT_PATH,
    TermVectors,
    neighbours_path,
    term_vectors,
)


def _computed(table: TermVectors) -> TermVectors:
    """The same table without kept neighbours: every list computed on demand."""
    return TermVectors(table.terms, table.vectors)


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_the_shipped_table_keeps_neighbours_made_from_its_own_vectors():
    shipped = term_vectors()
    assert neighbours_path(DEFAULT_PATH).exists() and shipped.kept is not None
    computed = _computed(shipped)
    for term in random.Random(7).sample(shipped.terms, 300):
        assert _same(shipped._nearest(term), computed._nearest(term)), term


def test_kept_neighbours_answer_a_corpus_as_computed_ones_do():
    shipped = term_vectors()
    computed = _computed(shipped)
    rng = random.Random(11)
    corpus = rng.sample(shipped.terms, 2000)
    among, among_computed = shipped.corpus_rows(corpus), computed.corpus_rows(corpus)
    for term in rng.sample(shipped.terms, 300):
        assert _same(
            shipped._nearest_among(term, among), computed._nearest_among(term, among_computed)
        ), term
        assert shipped.neighbours(
            term, known=set(corpus).__contains__, min_similarity=0.5, limit=4, among=among
        ) == computed.neighbours(term, known=set(corpus).__contains__, min_similarity=0.5, limit=4)


def _random_table(seed: int, n: int = 300, dim: int = 16) -> TermVectors:
    vectors = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    # Clustered enough that most terms have neighbours above the floor.
    vectors = vectors + np.repeat(vectors[::10], 10, axis=0)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return TermVectors([f"t{i:04d}" for i in range(n)], vectors)


def test_saving_a_table_keeps_its_neighbours_beside_it(tmp_path):
    table = _random_table(1)
    path = tmp_path / "table.npz"
    table.save(path)
    loaded = TermVectors.load(path)
    assert loaded.kept is not None
    computed = _computed(loaded)
    assert sum(len(loaded._nearest(t)[0]) for t in loaded.terms) > 0
    for term in loaded.terms:
        assert _same(loaded._nearest(term), computed._nearest(term)), term


@pytest.mark.parametrize("seed", [2, 3])
def test_neighbours_made_for_other_vectors_are_ignored(tmp_path, seed):
    path, other = tmp_path / "table.npz", tmp_path / "other.npz"
    _random_table(1).save(path)
    _random_table(seed).save(other)
    # The table's vectors replaced, its neighbours file left as it was.
    shutil.copy(other, path)
    loaded = TermVectors.load(path)
    assert loaded.kept is None
    fresh = TermVectors.load(other)
    for term in loaded.terms[:50]:
        assert _same(loaded._nearest(term), fresh._nearest(term)), term
