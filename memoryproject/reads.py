"""Read transactions: one consistent state of the database for a reader that makes several
queries (verification, proofs, exports), without holding up the writers.

The counterpart of ``writes.py``: a writer takes its turn and SQLite's write lock; a reader
here takes neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections, transaction


@contextmanager
def read_snapshot(using: str = DEFAULT_DB_ALIAS) -> Iterator[bool]:
    """One consistent state for all the reads inside, so that a write committed meanwhile is
    never half seen (its rows without its log entries, or the reverse): a repeatable-read
    transaction on PostgreSQL; on SQLite a deferred one, a WAL reader's snapshot taken at its
    first read, which writers do not wait for (an IMMEDIATE one, the configured mode, would hold
    the database's write lock for as long as the reads take). Reads only. Yields whether it
    opened the transaction (rather than joining the caller's, whose state it then reads)."""
    connection = connections[using]
    outermost = not connection.in_atomic_block
    deferred = outermost and connection.vendor == "sqlite"
    if deferred:
        connection.ensure_connection()  # connecting sets the configured mode again
        configured = connection.transaction_mode  # type: ignore[attr-defined]
        connection.transaction_mode = "DEFERRED"  # type: ignore[attr-defined]
    try:
        with transaction.atomic(using=using):
            if outermost and connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield outermost
    finally:
        if deferred:
            connection.transaction_mode = configured  # type: ignore[attr-defined]
