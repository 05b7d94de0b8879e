"""Making the related-terms table (``termvectors.py``) from a BERT sentence-embedding model.

The table is distilled once, offline, the way static embeddings are distilled from a
transformer: every whole word of the model's WordPiece vocabulary is run through the model on
its own (``[CLS] word [SEP]``) and its output mean-pooled, as the model pools a sentence. Words
are grouped by the index term the tokenizer makes of them (their Snowball stem: "activity",
"activities" and "active" are one term), a term's vector is the mean of its words', the table is
centred, reduced to its main ``dim`` directions (PCA) and every vector made unit length.

The forward pass is the numpy BERT encoder of ``bert.py``, the one the semantic backend runs
(post-layer-norm, GELU in its exact erf form, as the model's ``config.json`` names it), over
the model's own weights given as a name -> array mapping (the ``model.safetensors`` of a
sentence-transformers model such as all-MiniLM-L6-v2), with its vocabulary from ``vocab.txt``
or ``tokenizer.json``. The shipped table was made with GELU in its tanh approximation, before
the two readers of the model shared one encoder, and is kept as made: a table distilled now
from all-MiniLM-L6-v2 has the same terms and every similarity within 0.001 of it. Nothing here
runs when a query is ranked. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from graph_app.domain.bert import BertEncoder, BertShape, mean_pool
from graph_app.domain.termvectors import TermVectors
from graph_app.domain.tokenize import STOP_WORDS, stem


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


def tokenizer_vocab(tokenizer: Mapping[str, Any]) -> list[str]:
    """The WordPiece vocabulary, in token id order, of a ``tokenizer.json``."""
    model = tokenizer.get("model")
    ids = None
    if isinstance(model, Mapping) and model.get("type") == "WordPiece":
        ids = model.get("vocab")
    if not isinstance(ids, Mapping):
        raise ValueError("tokenizer.json: a WordPiece vocabulary expected")
    tokens = sorted(ids, key=ids.__getitem__)
    if [ids[token] for token in tokens] != list(range(len(tokens))):
        raise ValueError("tokenizer.json: token ids 0 to n - 1 expected")
    return tokens


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
        every = np.ones(ids.shape, dtype=np.float32)  # three real tokens, no padding
        out[done : done + n] = mean_pool(encoder.encode(ids), every)
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
