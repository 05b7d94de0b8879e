"""The BERT encoder forward pass, in numpy (no deep-learning framework).

One definition of the model's layer math, used by both of its readers: the semantic backend's
sentence encoder (``semantic.py``) and the distiller of the related-terms table
(``distill.py``). A post-layer-norm BERT encoder over the model's own weights (a name -> array
mapping, as ``model.safetensors`` holds them, plain or prefixed ``bert.``): word, position and
first token-type embeddings, layer norm (epsilon from ``config.json``), then per layer
self-attention with the padding masked out, GELU in its exact erf form (``hidden_act``
``"gelu"``, as BERT and all-MiniLM-L6-v2 define it) and layer norms after each residual.
Mean pooling over the real tokens turns the hidden states into one vector per sequence.
Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, np.dtype[np.float32]]

# erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, under float32's resolution at
# 1.0): the exact GELU, x * Phi(x), without a special-function library.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_SQRT_HALF = 0.7071067811865476


def erf(x: Array) -> Array:
    """The error function, elementwise (float32 in, float32 out)."""
    a = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * a)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t
    y = 1.0 - poly * np.exp(-a * a)
    return np.copysign(y, x).astype(np.float32, copy=False)


def gelu(x: Array) -> Array:
    """GELU in its exact form, 0.5 x (1 + erf(x / sqrt 2))."""
    return (0.5 * x * (1.0 + erf(x * np.float32(_SQRT_HALF)))).astype(np.float32, copy=False)


@dataclass(frozen=True)
class BertShape:
    """The encoder's sizes, from the model's ``config.json``."""

    hidden: int
    layers: int
    heads: int
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> BertShape:
        def number(name: str) -> int:
            value = config.get(name)
            if not isinstance(value, int):
                raise ValueError(f"config: {name} must be an integer")
            return value

        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError("config: hidden_act 'gelu' (the exact GELU) expected")
        eps = config.get("layer_norm_eps", 1e-12)
        return cls(
            hidden=number("hidden_size"),
            layers=number("num_hidden_layers"),
            heads=number("num_attention_heads"),
            layer_norm_eps=float(eps) if isinstance(eps, int | float) else 1e-12,
        )


@dataclass(frozen=True)
class _Layer:
    qkv: Array  # (hidden, 3 * hidden): query, key and value projections side by side
    qkv_bias: Array
    out: Array
    out_bias: Array
    norm1: tuple[Array, Array]
    inner: Array
    inner_bias: Array
    outer: Array
    outer_bias: Array
    norm2: tuple[Array, Array]


class BertEncoder:
    """A BERT encoder over a weight mapping, for batches of token ids."""

    def __init__(self, weights: Mapping[str, np.ndarray[Any, Any]], shape: BertShape) -> None:
        # Weights saved from a BertModel are plain ("embeddings..."), from a task model
        # prefixed ("bert.embeddings...").
        prefix = "" if "embeddings.word_embeddings.weight" in weights else "bert."

        def w(name: str) -> Array:
            return np.ascontiguousarray(weights[prefix + name], dtype=np.float32)

        def wt(name: str) -> Array:  # a dense layer's weight, transposed for x @ W
            return np.ascontiguousarray(np.asarray(weights[prefix + name], dtype=np.float32).T)

        self.shape = shape
        self.eps = np.float32(shape.layer_norm_eps)
        self.words = w("embeddings.word_embeddings.weight")
        self.positions = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")[0]
        self.embed_norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(shape.layers):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            self.layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(
                        np.concatenate(
                            [wt(f"{a}self.{n}.weight") for n in ("query", "key", "value")], 1
                        )
                    ),
                    qkv_bias=np.concatenate(
                        [w(f"{a}self.{n}.bias") for n in ("query", "key", "value")]
                    ),
                    out=wt(a + "output.dense.weight"),
                    out_bias=w(a + "output.dense.bias"),
                    norm1=(w(a + "output.LayerNorm.weight"), w(a + "output.LayerNorm.bias")),
                    inner=wt(p + "intermediate.dense.weight"),
                    inner_bias=w(p + "intermediate.dense.bias"),
                    outer=wt(p + "output.dense.weight"),
                    outer_bias=w(p + "output.dense.bias"),
                    norm2=(w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias")),
                )
            )

    def _norm(self, x: np.ndarray[Any, Any], scale_bias: tuple[Array, Array]) -> Array:
        mean = x.mean(-1, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(-1, keepdims=True)
        scale, bias = scale_bias
        normed = centred / np.sqrt(var + self.eps) * scale + bias
        return normed.astype(np.float32, copy=False)  # float32 already: no copy

    def encode(self, ids: np.ndarray[Any, Any], mask: Array | None = None) -> Array:
        """The last hidden states (batch, length, hidden) of a batch of token ids (batch,
        length), padded where ``mask`` is 0 (no mask: every position is a real token)."""
        batch, length = ids.shape
        hidden = self.shape.hidden
        heads, size = self.shape.heads, hidden // self.shape.heads
        x = (self.words[ids] + self.positions[:length][None] + self.token_type).astype(
            np.float32, copy=False
        )
        x = self._norm(x, self.embed_norm).reshape(batch * length, hidden)
        # Padded keys get no attention: a large negative score before the softmax.
        blocked = (
            None
            if mask is None
            else ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        )
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self.layers:
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(batch, length, 3, heads, size)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            scores = (q @ k) * scale
            if blocked is not None:
                scores = scores + blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
            x = self._norm(x + context @ layer.out + layer.out_bias, layer.norm1)
            inner = gelu(x @ layer.inner + layer.inner_bias)
            x = self._norm(x + inner @ layer.outer + layer.outer_bias, layer.norm2)
        return x.reshape(batch, length, hidden)


def mean_pool(states: Array, mask: Array) -> Array:
    """One vector per sequence: the mean of its hidden states over its real tokens (``mask``
    1), as a sentence-transformers model with mean pooling pools them."""
    return (states * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
