"""How much a serving process keeps of what its compiles make, item by item and text by text.

A compile makes, for the items it reaches, their tie-break keys, stream places and documents
from the index's columns, and counts and splits their lines and sentences; each is kept in a
cache of its own, so that the items recent compiles share are not made again. Every such cache
keeps at most ``WORKING_SET`` entries, least recently used first out: enough for the items of
several dozen compiles (a compile reaches at most a few hundred), and a bound on what a process
that answers many different queries for hours holds, whatever the size of the memory. (Caches
by word, whose entries the vocabulary bounds, and the index's own columns are not among them.)
"""

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

#: Entries kept by each cache of things made per item or per text (a few MiB each).
WORKING_SET = 4096
#: Short strings (names, kinds, terms) kept once decoded from an index's columns, at most.
STRINGS_KEPT = 8 * WORKING_SET
#: Terms whose BM25 scores are kept between compiles, at most (each an array over the
#: documents holding the term: a few KiB for most terms).
TERMS_KEPT = 1024


def kept(cache: dict[K, V], key: K, value: V, limit: int) -> V:
    """``value``, kept in ``cache`` for ``key``; the cache emptied first when it holds ``limit``
    entries (a bound cheaper to keep than an LRU's order, for entries that cost the same to make
    again)."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value
    return value


def grown(size: int, needed: int) -> int:
    """The new length of a per-slot array of ``size`` slots that must hold ``needed``: an
    eighth more (at least 64), so that appending stays cheap on the whole without a restored
    index's columns, copied on its first write, doubling in size (each column of 110,000 slots
    at 100k facts)."""
    return max(needed, size + max(64, size // 8))
