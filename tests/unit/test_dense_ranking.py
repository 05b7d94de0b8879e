"""The semantic backend's part of ranking (graph_app/domain/dense_column.py and
``MemoryIndex.rank`` with a query vector), with hand-made unit vectors: no model needed."""

from __future__ import annotations

import numpy as np
import pytest

from graph_app.domain.dense_column import DenseColumn
from graph_app.domain.memory_doc import MemoryDoc
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.memory_store import Visibility
from graph_app.domain.ranking_params import RankParams
from graph_app.domain.tokenize import tokenize


def _unit(*values):
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_dense_column_grows_forgets_and_scores_zero_without_a_vector():
    column = DenseColumn()
    column.put([0, 100], np.stack([_unit(1, 0), _unit(0, 1)]))
    assert len(column) == 2 and column.missing([0, 1, 100, 200]) == [1, 200]
    scores = column.similarity(_unit(1, 0), 202)
    assert scores.shape == (202,) and scores[0] == pytest.approx(1.0) and scores[100] == 0.0
    column.forget(0)
    assert column.missing([0]) == [0] and column.similarity(_unit(1, 0), 2)[0] == 0.0
    assert DenseColumn().similarity(_unit(1, 0), 3).tolist() == [0.0, 0.0, 0.0]


def test_a_dense_column_moved_keeps_each_vector_at_its_new_slot_and_none_where_none_was():
    column = DenseColumn()
    column.put([0, 2], np.stack([_unit(1, 0), _unit(0, 1)]))
    column.forget(2)
    moved = column.moved({0: 5, 1: 0, 2: 1})
    assert len(moved) == 1 and moved.missing([0, 1, 5]) == [0, 1]
    assert moved.similarity(_unit(1, 0), 6)[5] == pytest.approx(1.0)
    assert len(DenseColumn().moved({0: 1})) == 0


def _index():
    index = MemoryIndex()
    texts = {
        "episode:trip": "I took this picture in Spain last summer",
        "episode:dog": "we adopted a puppy from the shelter",
        "episode:code": "the parser returns a config object",
    }
    for key, text in texts.items():
        index.upsert(MemoryDoc(key=key, kind="episode", tokens=tuple(tokenize(text))))
    return index


def _embed(index, vectors):
    keys = list(vectors)
    index.dense.put([index.bm25.slot(k) for k in keys], np.stack([vectors[k] for k in keys]))


def test_a_query_vector_finds_an_item_in_other_words():
    index = _index()
    query = "which European countries has she visited"
    assert "episode:trip" not in dict(index.rank(query, Visibility()).ranked)
    _embed(
        index,
        {
            "episode:trip": _unit(1, 0.1, 0),
            "episode:dog": _unit(0, 1, 0),
            "episode:code": _unit(0, 0, 1),
        },
    )
    ranked = index.rank(query, Visibility(), query_vector=_unit(1, 0, 0)).ranked
    assert ranked[0][0] == "episode:trip"


def test_without_a_query_vector_or_with_weight_zero_ranking_is_unchanged():
    index = _index()
    before = index.rank("puppy shelter", Visibility()).ranked
    _embed(index, {"episode:trip": _unit(1, 0), "episode:dog": _unit(0, 1)})
    assert index.rank("puppy shelter", Visibility()).ranked == before
    off = RankParams(semantic_weight=0.0)
    assert index.rank("puppy shelter", Visibility(), off, query_vector=_unit(1, 0)).ranked == before


def test_a_replaced_item_loses_its_vector_until_embedded_again():
    index = _index()
    _embed(index, {"episode:trip": _unit(1, 0)})
    assert len(index.dense) == 1
    index.upsert(MemoryDoc(key="episode:trip", kind="episode", tokens=tuple(tokenize("new words"))))
    assert len(index.dense) == 0
