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

What must follow a commit but needs no place in the queue (witnessing a chain's new head,
which only ever moves forward) is registered with ``after_turn``: it runs once the transaction
has committed and the turn has passed to the next writer, before the write returns.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from memoryproject.dbconfig import is_sqlite_file

# As long as SQLite's own busy timeout: past it the writer goes on and SQLite decides.
TURN_TIMEOUT_SECONDS = 20.0
_TURN = threading.Lock()
# (process id, lock file path) -> descriptor. Keyed by process so that a worker forked from a
# process that had opened it opens its own: flock belongs to the open file, and a shared one
# would not exclude anything between the two processes.
_LOCK_FILES: dict[tuple[int, str], int] = {}
# The callbacks the current thread's turn runs once it has passed (None: no turn open).
_AFTER = threading.local()


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
    committed: list[Callable[[], None]] = []
    outer = getattr(_AFTER, "callbacks", None)  # a turn on another database, open around this
    turn = _TURN.acquire(timeout=TURN_TIMEOUT_SECONDS)
    try:
        descriptor = _lock_file(str(connection.settings_dict["NAME"])) if turn else None
        if descriptor is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        _AFTER.callbacks = committed
        try:
            with transaction.atomic(using=using):
                yield
        finally:
            _AFTER.callbacks = outer
            if descriptor is not None:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        if turn:
            _TURN.release()
    for callback in committed:  # the transaction committed (a rollback raised above)
        callback()


def after_turn(callback: Callable[[], None], using: str = DEFAULT_DB_ALIAS) -> None:
    """Runs ``callback`` once the open transaction has committed (never if it rolls back) and,
    on a SQLite file, once its write turn has passed to the next writer, so that the next
    writer does not wait for it; the write that registered it still returns only after it ran.
    Elsewhere (PostgreSQL, no turn open) it runs at the commit, as ``transaction.on_commit``."""
    committed = getattr(_AFTER, "callbacks", None)
    if committed is None or connections[using].vendor != "sqlite":
        transaction.on_commit(callback, using=using)
    else:
        transaction.on_commit(partial(committed.append, callback), using=using)
