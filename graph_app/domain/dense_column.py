"""Sentence vectors of the indexed documents, one per slot, for the optional semantic backend
(``semantic.py``): the ranker fuses their cosine similarity to the query's vector with BM25
(``MemoryIndex.rank``). A document replaced since its vector was made has none until it is
embedded again; a slot without one scores 0. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graph_app.domain.working_set import grown


class DenseColumn:
    """Unit vectors by slot (float32, zero rows where there is none)."""

    def __init__(self) -> None:
        self._vectors: np.ndarray[Any, np.dtype[np.float32]] | None = None
        self._has = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return int(np.count_nonzero(self._has))

    def forget(self, slot: int) -> None:
        """The document at ``slot`` changed: its vector no longer stands for it."""
        if slot < len(self._has):
            self._has[slot] = False

    def missing(self, slots: Sequence[int]) -> list[int]:
        """The ``slots`` that have no vector."""
        return [s for s in slots if s >= len(self._has) or not self._has[s]]

    def put(self, slots: Sequence[int], vectors: np.ndarray[Any, Any]) -> None:
        """Stores one vector (a row of ``vectors``) per slot."""
        if not len(slots):
            return
        dim = vectors.shape[1]
        size = max(slots) + 1
        if self._vectors is None or self._vectors.shape[1] != dim:
            self._vectors = np.zeros((max(size, 64), dim), dtype=np.float32)
            self._has = np.zeros(len(self._vectors), dtype=bool)
        if size > len(self._vectors):
            longer = grown(len(self._vectors), size)
            vectors_grown = np.zeros((longer, dim), dtype=np.float32)
            vectors_grown[: len(self._vectors)] = self._vectors
            has = np.zeros(longer, dtype=bool)
            has[: len(self._has)] = self._has
            self._vectors, self._has = vectors_grown, has
        index = np.asarray(slots, dtype=np.int64)
        self._vectors[index] = vectors
        self._has[index] = True

    def moved(self, slots: Mapping[int, int]) -> DenseColumn:
        """A column of this one's vectors at other slots (``slots``: old slot -> new slot); a
        slot without a vector here, or not in ``slots``, has none there."""
        column = DenseColumn()
        if self._vectors is None:
            return column
        pairs = [
            (old, new) for old, new in slots.items() if old < len(self._has) and self._has[old]
        ]
        if pairs:
            column.put([new for _, new in pairs], self._vectors[[old for old, _ in pairs]])
        return column

    def similarity(self, query: np.ndarray[Any, Any], n_slots: int) -> np.ndarray[Any, Any]:
        """Cosine similarity of each of ``n_slots`` slots to the unit ``query`` vector (0 where
        a slot has no vector)."""
        out = np.zeros(n_slots, dtype=np.float64)
        if self._vectors is None:
            return out
        n = min(n_slots, len(self._vectors))
        scores = self._vectors[:n] @ np.asarray(query, dtype=np.float32)
        out[:n] = np.where(self._has[:n], scores, 0.0)
        return out
