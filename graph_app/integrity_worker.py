"""A second process for full integrity verification: it reads and hashes a project's facts
while the verifying process replays the change log and reads the episodes, so that a large
project's verification uses two cores.

graph_app.selectors starts it as ``python -m graph_app.integrity_worker``, writes one job on
its stdin and reads the facts' digests from its stdout (both in ``marshal``'s format). The job
names the database, the statement the verifier would read the facts with, the project's slug
and, on PostgreSQL, the verifying transaction's exported snapshot: both processes read one
state of the graph. On SQLite the verifying transaction holds the write lock, so nothing
commits until both are done.

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

from graph_app.domain.hashing import record_digests
from graph_app.domain.records import fact_rows_leaves

#: Django's "format" placeholders as its SQLite backend turns them into "qmark" ones.
_FORMAT_PLACEHOLDER = re.compile(r"(?<!%)%s")
#: An exported PostgreSQL snapshot's id (e.g. 00000003-0000001B-1).
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9]+)?")
_CHUNK = 5_000


def _sqlite_rows(job: dict[str, Any]) -> Iterator[Sequence[Any]]:
    # As django.db.backends.sqlite3 reads them: declared types converted (a bool column's
    # stored 1 is True, anything else False); the instants come as text (CAST in the statement).
    sqlite3.register_converter("bool", b"1".__eq__)
    connection = sqlite3.connect(
        job["database"],
        timeout=20,
        detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES,
    )
    connection.execute("PRAGMA query_only = ON")
    sql = _FORMAT_PLACEHOLDER.sub("?", job["sql"]).replace("%%", "%")
    cursor = connection.execute(sql, job["params"])
    while chunk := cursor.fetchmany(_CHUNK):
        yield from chunk
    connection.close()


def _postgresql_rows(job: dict[str, Any]) -> Iterator[Sequence[Any]]:
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
        with connection.cursor(name="integrity_facts") as cursor:
            cursor.execute(job["sql"], job["params"])
            while chunk := cursor.fetchmany(_CHUNK):
                yield from chunk


def main() -> int:
    job = marshal.load(sys.stdin.buffer)
    rows = _sqlite_rows(job) if job["vendor"] == "sqlite" else _postgresql_rows(job)
    digests = record_digests(fact_rows_leaves(rows, job["project"]))
    sys.stdout.buffer.write(marshal.dumps(tuple(digests)))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
