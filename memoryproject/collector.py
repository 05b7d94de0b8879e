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


_start_up_paused = False


def start_up_pause() -> None:
    """The collector off for a server process's start-up (settings, apps, the command or the
    application with every view, the MCP server's registrations): hundreds of thousands of
    long-lived objects (modules, classes, schemas) with few cycles among them, over which each
    generational collection would walk again (150 to 200 ms of either door's start-up of
    about 1.5 s, 2026-12-03). Paired with ``start_up_settle`` once the process serves."""
    global _start_up_paused
    if gc.isenabled():
        gc.disable()
        _start_up_paused = True


def start_up_settle() -> None:
    """Ends the pause ``start_up_pause`` began (nothing otherwise): what start-up built lives
    as long as the process, so it leaves the collector's generations (``gc.freeze``: never
    scanned again, pages of forked workers stay shared) and the collector runs again. The few
    start-up cycles already garbage stay with it (a few thousand objects, a full collection
    then costing more than they weigh)."""
    global _start_up_paused
    if _start_up_paused:
        _start_up_paused = False
        gc.freeze()
        gc.enable()


def heap_trim() -> None:
    """Gives the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing on
    another C library): after bulk work let go of many large blocks (an index's postings
    dicts, about 70 MiB at 100k facts), which glibc would otherwise keep mapped, so the
    process's RSS says what it holds."""
    import ctypes  # here: a server's start-up imports this module, and needs no ctypes

    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
