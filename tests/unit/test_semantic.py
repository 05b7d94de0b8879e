"""The numpy sentence encoder (graph_app/domain/semantic.py over graph_app/domain/bert.py): the
model's published similarities, padding that changes nothing, and an exact GELU."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graph_app.domain import semantic
from graph_app.domain.bert import erf

needs_model = pytest.mark.skipif(
    not semantic.available(),
    reason=f"the semantic backend is not installed (missing: {semantic.missing()})",
)


def test_erf_is_exact_to_float32():
    x = np.linspace(-6, 6, 20_001, dtype=np.float32)
    expected = np.array([math.erf(float(v)) for v in x])
    assert np.abs(erf(x) - expected).max() < 1e-6
    assert erf(np.zeros(1, dtype=np.float32))[0] == 0.0


@needs_model
def test_the_models_published_similarities():
    # The sentence-transformers documentation's example for all-MiniLM-L6-v2:
    # tensor([[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]])
    vectors = semantic.sentence_encoder().encode(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarities = vectors @ vectors.T
    assert similarities[0, 1] == pytest.approx(0.6660, abs=1e-3)
    assert similarities[0, 2] == pytest.approx(0.1046, abs=1e-3)
    assert similarities[1, 2] == pytest.approx(0.1411, abs=1e-3)


@needs_model
def test_padding_and_batching_change_no_vector():
    encoder = semantic.sentence_encoder()
    texts = [
        "A short one.",
        "A much longer sentence, which pads the short one when they share a batch of texts.",
        "",
        "Medium length words here.",
    ]
    together = encoder.encode(texts, batch=4)
    alone = np.stack([encoder.encode([t], batch=1)[0] for t in texts])
    assert np.abs(together - alone).max() < 1e-5
    assert encoder.encode([]).shape == (0, 384)


@needs_model
def test_a_text_longer_than_the_model_reads_is_cut():
    encoder = semantic.sentence_encoder()
    long = " ".join(["memory"] * 2_000)
    vector = encoder.encode([long])
    assert vector.shape == (1, 384) and np.isfinite(vector).all()
