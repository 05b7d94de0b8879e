"""Making the related-terms table (``termvectors.py``) from a BERT sentence-embedding model.

The table is distilled once, offline, the way static embeddings are distilled from a
transformer: every whole word of the model's WordPiece vocabulary is run through the model on
its own (``[CLS] word [SEP]``) and its output mean-pooled, as the model pools a sentence. Words
are grouped by the index term the tokenizer makes of them (their Snowball stem: "activity",
"activities" and "active" are one term), a term's vector is the mean of its words', the table is
centred, reduced to its main ``dim`` directions (PCA) and every vector made unit length.

The forward pass is a plain numpy BERT encoder (post-layer-norm, GELU by its tanh form) over the
model's own weights, given as a name -> array mapping (the ``model.safetensors`` of a
sentence-transformers folder such as all-MiniLM-L6-v2). Nothing here runs when a query is
ranked. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from graph_app.domain.termvectors import TermVectors
from graph_app.domain.tokenize import STOP_WORDS, stem

_SQRT_2_OVER_PI = 0.7978845608028654


@dataclass(frozen=True)
class BertShape:
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

        eps = config.get("layer_norm_eps", 1e-12)
        return cls(
            hidden=number("hidden_size"),
            layers=number("num_hidden_layers"),
            heads=number("num_attention_heads"),
            layer_norm_eps=float(eps) if isinstance(eps, int | float) else 1e-12,
        )


class BertEncoder:
    """A BERT encoder over a weight mapping, for short sequences of token ids."""

    def __init__(self, weights: Mapping[str, np.ndarray], shape: BertShape) -> None:
        self.shape = shape
        self._w = {name: np.asarray(value, dtype=np.float32) for name, value in weights.items()}
        # Weights saved from a BertModel are plain ("embeddings..."), from a task model
        # prefixed ("bert.embeddings...").
        self._prefix = "" if "embeddings.word_embeddings.weight" in self._w else "bert."

    def _get(self, name: str) -> np.ndarray:
        return self._w[self._prefix + name]

    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        normed = (x - mean) / np.sqrt(var + self.shape.layer_norm_eps)
        return normed * self._get(f"{name}.weight") + self._get(f"{name}.bias")

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self._get(f"{name}.weight").T + self._get(f"{name}.bias")

    def encode(self, ids: np.ndarray) -> np.ndarray:
        """Hidden states (batch, length, hidden) of same-length sequences of token ids."""
        batch, length = ids.shape
        hidden, heads = self.shape.hidden, self.shape.heads
        size = hidden // heads
        x = (
            self._get("embeddings.word_embeddings.weight")[ids]
            + self._get("embeddings.position_embeddings.weight")[:length][None]
            + self._get("embeddings.token_type_embeddings.weight")[0][None, None]
        )
        x = self._layer_norm(x, "embeddings.LayerNorm")
        for layer in range(self.shape.layers):
            p = f"encoder.layer.{layer}."

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q = split(self._dense(x, p + "attention.self.query"))
            k = split(self._dense(x, p + "attention.self.key"))
            v = split(self._dense(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = self._layer_norm(
                x + self._dense(context, p + "attention.output.dense"),
                p + "attention.output.LayerNorm",
            )
            inner = self._dense(x, p + "intermediate.dense")
            inner = 0.5 * inner * (1 + np.tanh(_SQRT_2_OVER_PI * (inner + 0.044715 * inner**3)))
            x = self._layer_norm(x + self._dense(inner, p + "output.dense"), p + "output.LayerNorm")
        return x


def index_words(vocab: Sequence[str]) -> dict[str, list[int]]:
    """The vocabulary's whole words (ASCII letters, two or more, not stop words) grouped by
    the index term the tokenizer makes of them: term -> token ids."""
    groups: dict[str, list[int]] = {}
    for token_id, token in enumerate(vocab):
        if len(token) < 2 or not token.isascii() or not token.isalpha():
            continue  # pieces ("##ing"), markers ("[CLS]"), single letters, other scripts
        if token in STOP_WORDS:
            continue
        groups.setdefault(stem(token), []).append(token_id)
    return groups


def _batches(ids: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def word_vectors(
    encoder: BertEncoder,
    token_ids: list[int],
    *,
    cls_id: int,
    sep_id: int,
    batch: int = 1024,
    progress: Callable[[int], None] = lambda _n: None,
) -> np.ndarray:
    """The mean-pooled output of ``[CLS] token [SEP]`` for each token id (rows in order)."""
    out = np.zeros((len(token_ids), encoder.shape.hidden), dtype=np.float32)
    done = 0
    for chunk in _batches(token_ids, batch):
        n = len(chunk)
        ids = np.stack([np.full(n, cls_id), np.asarray(chunk), np.full(n, sep_id)], axis=1)
        out[done : done + n] = encoder.encode(ids).mean(axis=1)
        done += n
        progress(n)
    return out


def term_table(
    groups: Mapping[str, list[int]], vectors_of: Mapping[int, np.ndarray], dim: int
) -> TermVectors:
    """One unit vector per term: its words' mean, centred over the table and projected on the
    table's ``dim`` main directions."""
    terms = sorted(groups)
    table = np.stack([np.mean([vectors_of[i] for i in groups[t]], axis=0) for t in terms]).astype(
        np.float64
    )
    table -= table.mean(axis=0)
    _, _, directions = np.linalg.svd(table, full_matrices=False)
    dim = min(dim, directions.shape[0])
    projected = table @ directions[:dim].T
    norms = np.linalg.norm(projected, axis=1, keepdims=True)
    projected /= np.where(norms > 0, norms, 1.0)
    return TermVectors(terms, projected.astype(np.float32))


def distill(
    weights: Mapping[str, np.ndarray],
    config: Mapping[str, object],
    vocab: Sequence[str],
    *,
    dim: int = 256,
    batch: int = 1024,
    progress: Callable[[int], None] = lambda _n: None,
) -> TermVectors:
    """The related-terms table of a BERT model (its weights, ``config.json`` and vocabulary)."""
    groups = index_words(vocab)
    wanted = sorted({i for ids in groups.values() for i in ids})
    try:
        cls_id, sep_id = vocab.index("[CLS]"), vocab.index("[SEP]")
    except ValueError as exc:
        raise ValueError("vocab: [CLS] and [SEP] tokens expected") from exc
    encoder = BertEncoder(weights, BertShape.from_config(config))
    rows = word_vectors(
        encoder, wanted, cls_id=cls_id, sep_id=sep_id, batch=batch, progress=progress
    )
    vectors_of = dict(zip(wanted, rows, strict=True))
    return term_table(groups, vectors_of, dim)
