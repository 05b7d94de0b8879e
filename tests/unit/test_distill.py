"""The related-terms table is distilled by the numpy BERT encoder the semantic backend runs
(graph_app/domain/bert.py): checked on a small random model against the definition of each
step, not against a stored result."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graph_app.domain.bert import BertEncoder, BertShape, gelu, mean_pool
from graph_app.domain.distill import distill, index_words, term_table, tokenizer_vocab
from graph_app.domain.termvectors import TermVectors

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "##ing",
    "a",
    "the",
    "activity",
    "activities",
    "dog",
    "dogs",
    "puppy",
    "spain",
    "日本",
    "x2",
]


def _weights(shape: BertShape, vocab_size: int, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, inner = shape.hidden, 4 * shape.hidden

    def m(*dims):
        return rng.normal(0, 0.2, dims).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": m(vocab_size, h),
        "embeddings.position_embeddings.weight": m(8, h),
        "embeddings.token_type_embeddings.weight": m(2, h),
        "embeddings.LayerNorm.weight": np.ones(h, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(h, np.float32),
    }
    for layer in range(shape.layers):
        p = f"encoder.layer.{layer}."
        for name in ("query", "key", "value"):
            w[p + f"attention.self.{name}.weight"] = m(h, h)
            w[p + f"attention.self.{name}.bias"] = m(h)
        w[p + "attention.output.dense.weight"] = m(h, h)
        w[p + "attention.output.dense.bias"] = m(h)
        w[p + "intermediate.dense.weight"] = m(inner, h)
        w[p + "intermediate.dense.bias"] = m(inner)
        w[p + "output.dense.weight"] = m(h, inner)
        w[p + "output.dense.bias"] = m(h)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + norm + ".weight"] = np.ones(h, np.float32)
            w[p + norm + ".bias"] = np.zeros(h, np.float32)
    return w


SHAPE = BertShape(hidden=16, layers=2, heads=4)
CONFIG = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4}


def test_whole_words_are_grouped_by_their_index_term():
    groups = index_words(VOCAB)
    # Pieces, markers, single letters, stop words, other scripts and digits are left out.
    assert set(groups) == {"activ", "dog", "puppi", "spain"}
    assert [VOCAB[i] for i in groups["activ"]] == ["activity", "activities"]


def test_encoder_layers_follow_bert():
    weights = _weights(SHAPE, len(VOCAB))
    encoder = BertEncoder(weights, SHAPE)
    ids = np.array([[2, 9, 3], [2, 12, 3]])
    out = encoder.encode(ids)
    assert out.shape == (2, 3, 16)
    # Post-layer-norm with unit gain and zero bias: every position is normalised.
    assert np.allclose(out.mean(-1), 0, atol=1e-5)
    assert np.allclose(out.std(-1), 1, atol=1e-3)
    # Attention mixes positions: a word's output depends on its neighbours.
    other = encoder.encode(np.array([[2, 9, 2]]))
    assert not np.allclose(out[0, 1], other[0, 1])
    # A task model's prefixed weights read the same.
    prefixed = BertEncoder({f"bert.{k}": v for k, v in weights.items()}, SHAPE)
    assert np.allclose(prefixed.encode(ids), out)
    # Padding masked out changes no real token's state, and pooling skips it.
    padded = np.array([[2, 9, 3, 0, 0]])
    mask = np.array([[1, 1, 1, 0, 0]], dtype=np.float32)
    states = encoder.encode(padded, mask)
    assert np.allclose(states[0, :3], out[0], atol=1e-5)
    assert np.allclose(mean_pool(states, mask)[0], out[0].mean(0), atol=1e-5)


def test_gelu_is_the_exact_form():
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0], dtype=np.float32)
    exact = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()]
    assert np.allclose(gelu(x), exact, atol=1e-6)


def test_distilled_table_is_one_unit_vector_per_term_and_reproducible():
    weights = _weights(SHAPE, len(VOCAB))
    table = distill(weights, CONFIG, VOCAB, dim=3, batch=2)
    again = distill(weights, CONFIG, VOCAB, dim=3, batch=64)
    assert table.terms == ["activ", "dog", "puppi", "spain"]
    assert table.dim == 3
    assert np.allclose(np.linalg.norm(table.vectors, axis=1), 1.0, atol=1e-5)
    # The batch size changes nothing.
    assert np.allclose(table.vectors, again.vectors, atol=1e-5)


def test_a_terms_vector_is_the_mean_of_its_words():
    groups = {"a": [0, 1], "b": [2], "c": [3]}
    vectors_of = {
        0: np.array([1.0, 0.0, 0.0]),
        1: np.array([0.0, 1.0, 0.0]),
        2: np.array([0.5, 0.5, 0.0]),  # the mean of a's words: the same direction after centring
        3: np.array([0.0, 0.0, 1.0]),
    }
    table = term_table(groups, vectors_of, dim=3)
    assert table.similarity("a", "b") == pytest.approx(1.0, abs=1e-6)
    assert table.similarity("a", "c") < 0


def test_table_round_trips_through_its_file(tmp_path):
    table = TermVectors(["x", "y"], np.array([[1.0, 0.0], [0.6, 0.8]]))
    path = tmp_path / "t.npz"
    table.save(path)
    loaded = TermVectors.load(path)
    assert loaded.terms == ["x", "y"]
    assert loaded.similarity("x", "y") == pytest.approx(0.6, abs=1e-3)
    assert loaded.neighbours("x", known=lambda t: True, min_similarity=0.5, limit=3) == [
        ("y", pytest.approx(0.6, abs=1e-3))
    ]
    # Below the asked similarity, or unknown to the corpus: not a neighbour.
    assert loaded.neighbours("x", known=lambda t: True, min_similarity=0.7, limit=3) == []
    assert loaded.neighbours("x", known=lambda t: False, min_similarity=0.5, limit=3) == []
    # Below the floor the table keeps, a neighbour could be missed: refused, not guessed.
    with pytest.raises(ValueError, match="min_similarity"):
        loaded.neighbours("x", known=lambda t: True, min_similarity=0.2, limit=3)


def test_config_must_give_the_encoder_shape():
    with pytest.raises(ValueError, match="hidden_size"):
        BertShape.from_config({"num_hidden_layers": 2, "num_attention_heads": 4})
    # Another activation than the exact GELU is refused, not approximated.
    with pytest.raises(ValueError, match="hidden_act"):
        BertShape.from_config({**CONFIG, "hidden_act": "gelu_new"})


def test_the_vocabulary_is_read_from_a_tokenizer_file():
    tokenizer = {"model": {"type": "WordPiece", "vocab": {"b": 1, "a": 2, "[PAD]": 0}}}
    assert tokenizer_vocab(tokenizer) == ["[PAD]", "b", "a"]
    with pytest.raises(ValueError, match="0 to n - 1"):
        tokenizer_vocab({"model": {"type": "WordPiece", "vocab": {"a": 1}}})
    with pytest.raises(ValueError, match="WordPiece"):
        tokenizer_vocab({"model": {"type": "BPE", "vocab": {"a": 0}}})


def test_a_table_takes_its_terms_sorted_and_once():
    # Ties between neighbours are broken by row, which is term order only in a sorted table.
    with pytest.raises(ValueError, match="sorted"):
        TermVectors(["y", "x"], np.eye(2))
    with pytest.raises(ValueError, match="sorted"):
        TermVectors(["x", "x"], np.eye(2))
    table = TermVectors(["a", "b", "c"], np.array([[1.0, 0.0], [0.6, 0.8], [0.6, 0.8]]))
    assert table.near("a") == (("b", pytest.approx(0.6)), ("c", pytest.approx(0.6)))
