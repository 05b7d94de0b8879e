"""A second process for full integrity verification: it reads and hashes a project's facts
while the verifying process replays the change log and reads the episodes, so that a large
project's verification uses two cores.

graph_app.integrity_worker_client starts it as ``python -m graph_app.integrity_worker``, writes
one job on its stdin and reads the facts' digests from its stdout (both in ``marshal``'s
format). The job names the database, the statement the verifier would read the facts with, the
one reading the project's graph head (revision, changes, head hash), the project's slug and, on
PostgreSQL, the verifying transaction's exported snapshot: both processes read one state of the
graph. On SQLite the worker reads the head and the facts in one read transaction of its own, and
the verifier uses its digests only when it finds the same head in its snapshot (every write
through the services moves it); else it reads the facts itself.

The rows are turned into leaves by the same function as in the verifying process
(``fact_rows_leaves``), read with the converters Django's SQLite backend registers for these
columns, so a worker's digests are the ones the verifier computes itself. It imports no Django:
starting it costs an interpreter, not the application.
"""

from __future__ import annotations

import marshal
import re
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from graph_app.domain.records import fact_rows_leaves
from memoryproject.domain.hashing import RecordDigests, record_digests

#: Django's "format" placeholders as its SQLite backend turns them into "qmark" ones.
_FORMAT_PLACEHOLDER = re.compile(r"(?<!%)%s")
#: An exported PostgreSQL snapshot's id (e.g. 00000003-0000001B-1).
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9]+)?")
_CHUNK = 5_000


def _qmark(sql: str) -> str:
    return _FORMAT_PLACEHOLDER.sub("?", sql).replace("%%", "%")


def _sqlite_read(job: dict[str, Any]) -> tuple[list[Any], RecordDigests]:
    # As django.db.backends.sqlite3 reads them: declared types converted (a bool column's
    # stored 1 is True, anything else False); the instants come as text (CAST in the statement).
    sqlite3.register_converter("bool", b"1".__eq__)
    connection = sqlite3.connect(
        job["database"],
        timeout=20,
        detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES,
        isolation_level=None,
    )
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.execute("BEGIN")  # one snapshot for the head and the facts
        head = connection.execute(_qmark(job["head_sql"]), job["head_params"]).fetchone()
        cursor = connection.execute(_qmark(job["sql"]), job["params"])
        digests = record_digests(fact_rows_leaves(_chunks(cursor), job["project"]))
        connection.execute("COMMIT")
    finally:
        connection.close()
    return list(head or []), digests


def _postgresql_read(job: dict[str, Any]) -> tuple[list[Any], RecordDigests]:
    import psycopg

    snapshot = job["snapshot"]
    if not _SNAPSHOT_ID.fullmatch(snapshot):
        raise ValueError(f"not an exported snapshot id: {snapshot!r}")
    with psycopg.connect(**job["database"]) as connection:
        connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        connection.read_only = True
        # The first statement of the transaction: it sees what the verifier's sees.
        connection.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
        connection.execute("SET TIME ZONE 'UTC'")
        head = connection.execute(job["head_sql"], job["head_params"]).fetchone()
        with connection.cursor(name="integrity_facts") as cursor:
            cursor.execute(job["sql"], job["params"])
            digests = record_digests(fact_rows_leaves(_chunks(cursor), job["project"]))
    return list(head or []), digests


def _chunks(cursor: Any) -> Iterator[Sequence[Any]]:
    while chunk := cursor.fetchmany(_CHUNK):
        yield from chunk


def main() -> int:
    job = marshal.load(sys.stdin.buffer)
    read = _sqlite_read if job["vendor"] == "sqlite" else _postgresql_read
    head, digests = read(job)
    sys.stdout.buffer.write(marshal.dumps((head, *digests)))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
