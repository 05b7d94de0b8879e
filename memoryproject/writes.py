"""Write transactions that take turns inside a process before they reach SQLite.

SQLite has one write lock per database, taken at ``BEGIN IMMEDIATE``. A connection that finds
it held sleeps in SQLite's busy handler with growing waits (1, 2, 5 ... 100 ms) and polls again,
so under concurrent writers from many threads the lock sits idle between a commit and the next
poll and the slowest writer waits hundreds of milliseconds. Here the threads of one process
queue on a Python lock instead (woken as soon as the writer before them commits); only one
writer per process meets the other processes at SQLite's lock. PostgreSQL, which queues its
row locks itself, and blocks nested in a transaction already open go straight through.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections, transaction

# As long as SQLite's own busy timeout: past it the writer goes on and SQLite decides.
TURN_TIMEOUT_SECONDS = 20.0
_TURN = threading.Lock()


@contextmanager
def write_transaction(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """``transaction.atomic(using)``; an outermost one on SQLite first waits for its turn among
    this process's threads."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        with transaction.atomic(using=using):
            yield
        return
    turn = _TURN.acquire(timeout=TURN_TIMEOUT_SECONDS)
    try:
        with transaction.atomic(using=using):
            yield
    finally:
        if turn:
            _TURN.release()
