"""Write transactions that take turns before they reach SQLite.

SQLite has one write lock per database, taken at ``BEGIN IMMEDIATE``. A connection that finds
it held sleeps in SQLite's busy handler with growing waits (1, 2, 5 ... 100 ms) and polls again,
so under concurrent writers the lock sits idle between a commit and the next poll and the
slowest writer waits hundreds of milliseconds (with two server workers, two processes' worth
of writers got no more done than one). Here writers queue instead: the threads of one process on
a Python lock, then one writer per process on an exclusive ``flock`` of a file beside the
database (``<database>-writer``), which the kernel hands to the next waiter as soon as the
writer before it commits. A process that dies releases its ``flock``; a hung one holds it until
it is killed (the REST API's server has no per-request timeout). PostgreSQL, which queues its
row locks itself, in-memory SQLite databases and blocks nested in a transaction already open go
straight through.

A write's sync to disk needs no place in the queue either. Connections commit at
``synchronous=FULL`` (memoryproject.dbconfig), which flushes the write-ahead log inside the
commit, that is inside the turn: with a flush of 0.7 to 0.9 ms that bounded every writer to
about a thousand commits a second, whatever the cores did. A transaction that takes the turn
commits at ``NORMAL`` instead (its frames written to the log, not yet flushed), passes the turn
on, then flushes the log itself (``fdatasync``) before it returns: nothing is acknowledged
before it is on disk. The log is append-only between checkpoints, and SQLite recovers a prefix
of its commits (each frame's checksum chains to the one before), so a flush covers this commit
and every one before it; a checkpoint in between flushes the log first and the database file
after, so a log restarted or removed since holds nothing this commit still needs. Writes that
take no turn (the admin's, sessions', migrations') commit at ``FULL`` as before. For the
fraction of a millisecond between its commit and its flush, a transaction's rows can be read by
another connection before they are on disk; a power cut then would lose them with the write
that was never acknowledged, and nothing built on them was acknowledged either (a later
writer's flush covers them, and the witness signs a head only after its flush).

What must follow a commit but needs no place in the queue (witnessing a chain's new head,
which only ever moves forward) is registered with ``after_turn``: it runs once the transaction
has committed, the turn has passed to the next writer and the log is flushed, before the write
returns.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from memoryproject import sql
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
    name = str(connection.settings_dict["NAME"])
    turn = _TURN.acquire(timeout=TURN_TIMEOUT_SECONDS)
    try:
        descriptor = _lock_file(name) if turn else None
        if descriptor is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        _AFTER.callbacks = committed
        try:
            if descriptor is not None:
                _synchronous(connection, "NORMAL")  # the log is flushed below, after the turn
            with transaction.atomic(using=using):
                yield
        finally:
            _AFTER.callbacks = outer
            if descriptor is not None:
                try:
                    _synchronous(connection, "FULL")
                except Exception:
                    connection.close()  # a new connection starts at FULL
                    raise
                finally:
                    fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        if turn:
            _TURN.release()
    # The transaction committed (a rollback raised above).
    if descriptor is not None:
        wal_flush(name)
    for callback in committed:
        callback()


def _synchronous(connection: BaseDatabaseWrapper, level: str) -> None:
    sql.execute(f"PRAGMA synchronous={level}", using=connection.alias)


def wal_flush(database_name: str) -> None:
    """Flushes the write-ahead log of a SQLite database file to disk (``fdatasync``), with every
    commit written to it so far. No log: a checkpoint moved it into the database file, which it
    flushed, and removed it."""
    try:
        descriptor = os.open(f"{database_name}-wal", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fdatasync(descriptor)
    finally:
        os.close(descriptor)


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
