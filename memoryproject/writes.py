"""Write transactions that take turns before they reach SQLite.

SQLite has one write lock per database, taken at ``BEGIN IMMEDIATE``. A connection that finds
it held sleeps in SQLite's busy handler with growing waits (1, 2, 5 ... 100 ms) and polls again,
so under concurrent writers the lock sits idle between a commit and the next poll and the
slowest writer waits hundreds of milliseconds (with two gunicorn workers, two processes' worth
of writers got no more done than one). Here writers queue instead: the threads of one process on
a Python lock, then one writer per process on an exclusive ``flock`` of a file beside the
database (``<database>-writer``), which the kernel hands to the next waiter as soon as the
writer before it commits. A process that dies releases its ``flock``; a hung one is bounded by
the server's worker timeout. PostgreSQL, which queues its row locks itself, in-memory SQLite
databases and blocks nested in a transaction already open go straight through.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from memoryproject.dbconfig import is_sqlite_file

# As long as SQLite's own busy timeout: past it the writer goes on and SQLite decides.
TURN_TIMEOUT_SECONDS = 20.0
_TURN = threading.Lock()
# (process id, lock file path) -> descriptor. Keyed by process so that a worker forked from a
# process that had opened it opens its own: flock belongs to the open file, and a shared one
# would not exclude anything between the two processes.
_LOCK_FILES: dict[tuple[int, str], int] = {}


def _lock_file(database_name: str) -> int | None:
    """The descriptor of the writer lock file for a SQLite database file (None: in memory)."""
    if not is_sqlite_file(database_name):
        return None
    path = f"{database_name}-writer"
    key = (os.getpid(), path)
    descriptor = _LOCK_FILES.get(key)
    if descriptor is None:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        _LOCK_FILES[key] = descriptor
    return descriptor


@contextmanager
def write_transaction(using: str = DEFAULT_DB_ALIAS, *, savepoint: bool = True) -> Iterator[None]:
    """``transaction.atomic(using, savepoint=savepoint)``: every write of the service opens its
    transaction here. An outermost one on a SQLite file first waits for its turn among this
    process's threads, then among the processes writing the same file (a writer that went
    straight to SQLite instead would poll its busy lock behind the queue, and could time out)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        with transaction.atomic(using=using, savepoint=savepoint):
            yield
        return
    turn = _TURN.acquire(timeout=TURN_TIMEOUT_SECONDS)
    try:
        descriptor = _lock_file(str(connection.settings_dict["NAME"])) if turn else None
        if descriptor is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        try:
            with transaction.atomic(using=using):
                yield
        finally:
            if descriptor is not None:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        if turn:
            _TURN.release()
