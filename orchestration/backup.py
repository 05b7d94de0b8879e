"""A consistent copy of the SQLite database while the service runs (``manage.py backup_db``).

Copying the file is not a backup: with write-ahead logging the recent commits live in the
``-wal`` file beside it, and a copy taken while a checkpoint writes pages back can hold half of
one. SQLite's online backup API copies every page of one read snapshot instead; writers go on
(a WAL reader does not block them), and the copy holds every transaction committed before the
snapshot began and none after. The copy is written beside its final name, checked
(``PRAGMA integrity_check``), flushed to disk and only then renamed into place, so a backup
that fails leaves no file that looks like one.

PostgreSQL is backed up with its own tools (``pg_dump``, or base backups with WAL archiving):
the command says so rather than copying anything.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from audit_app.models import InjectionLogHead, InjectionRecord
from graph_app.models import GraphRevision
from memoryproject import sql
from memoryproject.dbconfig import is_sqlite_file
from memoryproject.errors import ApplicationError
from memoryproject.filemodes import private_file_create
from memoryproject.models import Project


@dataclass(frozen=True)
class BackupResult:
    path: str
    bytes: int
    pages: int
    elapsed_ms: float
    integrity_check: str
    # What the copy holds, read from the copy: its receipts and the injection log's head, and
    # each project's graph revision (a restore can be checked against these).
    receipts: int
    log_head_seq: int
    log_head_hash: str
    graph_revisions: dict[str, int]

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.integrity_check == "ok", **asdict(self)}


def _refuse_unless_sqlite_file(using: str) -> str:
    connection = connections[using]
    if connection.vendor != "sqlite":
        raise ApplicationError(
            f"database: backup_db copies a SQLite file; this database is {connection.vendor}: "
            "back it up with pg_dump (or base backups with WAL archiving)",
            field="database",
        )
    name = str(connection.settings_dict["NAME"])
    if not is_sqlite_file(name):
        raise ApplicationError(
            "database: an in-memory database has no file to back up", field="database"
        )
    return name


def _target(out: Path, source: str, force: bool) -> Path:
    if out.exists() and out.is_dir():
        raise ApplicationError(
            f"--out: {out} is a directory; name the file to write", field="--out"
        )
    if out.exists() and not force:
        raise ApplicationError(f"--out: {out} exists; pass --force to replace it", field="--out")
    if out.resolve() == Path(source).resolve():
        raise ApplicationError("--out: must not be the database itself", field="--out")
    if not out.parent.is_dir():
        raise ApplicationError(f"--out: the directory {out.parent} does not exist", field="--out")
    return out.with_name(f".{out.name}.partial")


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _contents(copy: sqlite3.Connection) -> tuple[int, int, str, dict[str, int]]:
    """(receipts, log head seq, log head hash, graph revision by project slug) of the copy."""
    receipts = copy.execute(f"SELECT COUNT(*) FROM {sql.table(InjectionRecord)}").fetchone()[0]
    head = copy.execute(
        f"SELECT seq, last_hash FROM {sql.table(InjectionLogHead)} ORDER BY id LIMIT 1"
    ).fetchone()
    revisions = dict(
        copy.execute(
            f"SELECT p.slug, r.revision FROM {sql.table(GraphRevision)} r "
            f"JOIN {sql.table(Project)} p ON p.id = r.project_id ORDER BY p.slug"
        ).fetchall()
    )
    seq, last = head if head is not None else (0, "")
    return int(receipts), int(seq), str(last), {str(k): int(v) for k, v in revisions.items()}


def database_backup(
    *, out: Path, force: bool = False, using: str = DEFAULT_DB_ALIAS
) -> BackupResult:
    """Copies the SQLite database to ``out`` from one read snapshot, checks the copy and answers
    what it holds. Refuses (naming the argument) PostgreSQL, an in-memory database, an existing
    ``out`` without ``force`` and a ``out`` that is the database itself."""
    source = _refuse_unless_sqlite_file(using)
    partial = _target(out, source, force)
    started = time.perf_counter()
    connection = connections[using]
    if connection.in_atomic_block:
        # Its own uncommitted writes would keep the snapshot from ever being taken.
        raise ApplicationError("database: a backup runs outside any transaction", field="database")
    connection.ensure_connection()
    partial.unlink(missing_ok=True)
    # The copy holds the whole memory: created 0600 before SQLite opens it (an empty file is an
    # empty database), whatever the process's umask; its journal takes the same mode.
    private_file_create(partial)
    copy = sqlite3.connect(partial)
    try:
        # pages=-1: every page in one step, from one read snapshot of the source.
        connection.connection.backup(copy, pages=-1)
        check = copy.execute("PRAGMA integrity_check").fetchone()[0]
        pages = copy.execute("PRAGMA page_count").fetchone()[0]
        contents = _contents(copy)
    except BaseException:
        copy.close()
        partial.unlink(missing_ok=True)
        raise
    copy.close()
    if check != "ok":
        partial.unlink(missing_ok=True)
        raise ApplicationError(
            f"database: the copy failed its integrity check: {check}", field="database"
        )
    _fsync(partial)
    os.replace(partial, out)
    _fsync(out.parent)
    return BackupResult(
        path=str(out),
        bytes=out.stat().st_size,
        pages=int(pages),
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
        integrity_check=check,
        receipts=contents[0],
        log_head_seq=contents[1],
        log_head_hash=contents[2],
        graph_revisions=contents[3],
    )
