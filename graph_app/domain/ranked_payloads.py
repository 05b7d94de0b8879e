"""The payloads of a ranking's items, read when the packer reaches them.

A compile ranks up to ``PACK_CANDIDATES_MAX`` items but packs the best few dozen: a restored
index makes each payload from its columns (``stored_columns.py``), so ``RankedPayloads`` makes
them in chunks along the ranking, as the packer reads down it, instead of all at once. The index
fixes, when the ranking is taken (under its lock), which payloads are the documents' written
since and which come from its stored columns, which never change: a refresh afterwards cannot
change what this ranking reads. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

#: Payloads made at once when the packer reaches one not made yet. A compile at 800 tokens reads
#: about 40 candidates: 16 at a time makes fewer it never reads than 32, and pays the columns'
#: fixed cost per read less often than 8 (instructions of the benchmark's first compiles at 100k:
#: 16 the fewest).
CHUNK = 16


class RankedPayloads(Mapping[str, T], Generic[T]):
    """key -> payload of a ranking's items, in rank order; ``read(positions)`` makes the
    payloads at those positions of the ranking."""

    def __init__(self, keys: Sequence[str], read: Callable[[Sequence[int]], list[T]]) -> None:
        self._keys = list(keys)
        self._at = {key: n for n, key in enumerate(self._keys)}
        self._read = read
        self._made: dict[int, T] = {}

    def __getitem__(self, key: str) -> T:
        n = self._at[key]
        found = self._made.get(n)
        if found is None:
            first = n - n % CHUNK
            wanted = [
                p for p in range(first, min(first + CHUNK, len(self._keys))) if p not in self._made
            ]
            self._made.update(zip(wanted, self._read(wanted), strict=True))
            found = self._made[n]
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def made(self) -> Iterator[tuple[str, T]]:
        """(key, payload) of the payloads made so far."""
        return ((self._keys[n], payload) for n, payload in self._made.items())


class TakenPayloads(dict[str, T]):
    """key -> payload of a ranking's items, all taken when the ranking was (documents held in
    memory: taking one is a lookup); read as ``RankedPayloads`` is."""

    def made(self) -> Iterator[tuple[str, T]]:
        """(key, payload) of every payload (all made)."""
        return iter(self.items())
