"""The cyclic garbage collector paused around bulk work."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a bulk read builds many long-lived objects that
    hold no reference cycles (rows, hashes, tuples): each generational collection would scan
    the growing set again, which at 100k records cost verification a third of its time.
    Reference counting still frees everything; the collector runs again afterwards. Process
    wide: another thread's collections wait too, and a pause begun while the collector was
    already off leaves it off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
