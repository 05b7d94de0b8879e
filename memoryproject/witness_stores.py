"""Where the witness keeps its signed lines: a local directory, or a second database.

Both hold the same two things (memoryproject.witness signs and checks every line; a store only
keeps bytes and serialises writers):

- the entries, one line each, numbered from 1, appended under a lock every process takes;
- each chain's head, replaced only by a newer one, under a lock per stream.

``DirectoryStore`` (``WITNESS_DIR``): ``entries.jsonl`` (appended with O_APPEND and fsynced)
and ``heads/<stream>.head`` (two slots written in turn in place, so a write torn by a crash
leaves the previous head), ``flock`` between processes. One host.

``DatabaseStore`` (``WITNESS_DATABASE_URL``, PostgreSQL or SQLite): two tables in a database
other than the service's, with credentials the service's database does not hold. Several nodes
writing one service database share it, so every node's heads are witnessed in one place. Its
writers serialise on an advisory lock (PostgreSQL) or the write lock (SQLite).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memoryproject.dbconfig import database_url_parse

ENTRIES = "entries.jsonl"
HEADS = "heads"
#: Bytes of one slot of a head file (two slots per file).
SLOT = 1024


def private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


class DirectoryStore:
    """The witness in a local directory (0700, files 0600)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.label = str(directory)
        self._fds: dict[tuple[int, str], int] = {}

    def _fd(self, name: str) -> int:
        """This process's descriptor of ``name`` (kept open: heads move on every commit)."""
        key = (os.getpid(), name)
        fd = self._fds.get(key)
        if fd is None:
            path = self.directory / name
            private_dir(path.parent)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._fds[key] = fd
        return fd

    @contextlib.contextmanager
    def _flocked(self, name: str) -> Iterator[int]:
        fd = self._fd(name)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    # --- entries ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def entries_locked(self) -> Iterator[None]:
        with self._flocked(".entries.lock"):
            yield

    def entries_read(self, cursor: Any) -> tuple[Any, list[bytes], bool]:
        """Complete lines after ``cursor`` ((inode, offset), None at first), the new cursor,
        and whether the file was replaced or cut (then every line, from the start)."""
        path = self.directory / ENTRIES
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None, [], cursor is not None
        inode, offset = cursor if cursor is not None else (stat.st_ino, 0)
        reset = inode != stat.st_ino or stat.st_size < offset
        if reset:
            inode, offset = stat.st_ino, 0
        if stat.st_size == offset:
            return (inode, offset), [], reset
        with open(path, "rb") as handle:
            handle.seek(offset)
            tail = handle.read()
        lines = []
        for raw in tail.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break  # a line still being written
            lines.append(raw.rstrip(b"\n"))
            offset += len(raw)
        return (inode, offset), lines, reset

    def entry_write(self, n: int, line: bytes) -> None:
        path = self.directory / ENTRIES
        private_dir(self.directory)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- heads --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def head_locked(self, stream: str) -> Iterator[None]:
        with self._flocked(f"{HEADS}/{stream}.head"):
            yield

    def head_lines(self, stream: str) -> list[bytes]:
        """Both slots (b"" where empty), read through this process's open descriptor once the
        file exists (a head is read on every commit)."""
        name = f"{HEADS}/{stream}.head"
        if (os.getpid(), name) not in self._fds and not (self.directory / name).exists():
            return []
        raw = os.pread(self._fd(name), 2 * SLOT, 0)
        if not raw:
            return []
        return [raw[slot * SLOT : (slot + 1) * SLOT].strip() for slot in (0, 1)]

    def head_write(self, stream: str, line: bytes, newest: int | None) -> None:
        """Writes ``line`` into the slot that does not hold the newest head (``newest``: its
        index in ``head_lines``), in place: a rename per commit costs a hundred times more."""
        if len(line) >= SLOT:
            raise ValueError(f"a head of {stream} is too long to keep ({len(line)} bytes)")
        slot = 1 - newest if newest is not None else 0
        os.pwrite(self._fd(f"{HEADS}/{stream}.head"), line.ljust(SLOT - 1) + b"\n", slot * SLOT)

    def streams(self) -> list[str]:
        heads = self.directory / HEADS
        return [p.stem for p in heads.glob("*.head")] if heads.is_dir() else []


_TABLES = (
    "CREATE TABLE IF NOT EXISTS memoryproject_witness_entry "
    "(n BIGINT PRIMARY KEY, line TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memoryproject_witness_head "
    "(stream VARCHAR(200) PRIMARY KEY, seq BIGINT NOT NULL, line TEXT NOT NULL)",
)


class DatabaseStore:
    """The witness in a second database (PostgreSQL or SQLite), shared by several nodes."""

    def __init__(self, url: str) -> None:
        config = database_url_parse(url)
        self.vendor = "sqlite" if config["ENGINE"].endswith("sqlite3") else "postgresql"
        if self.vendor == "postgresql" and not config["ENGINE"].endswith("postgresql"):
            raise ValueError(f"WITNESS_DATABASE_URL: {config['ENGINE']} is not supported")
        self.config = config
        host = config.get("HOST") or "local"
        self.label = (
            f"sqlite {config['NAME']}"
            if self.vendor == "sqlite"
            else f"postgresql {config['NAME']} on {host}"
        )
        self._connection: Any = None
        self._pid = 0
        self._lock = threading.RLock()
        self._depth = 0

    def _cursor(self) -> Any:
        if self._connection is None or self._pid != os.getpid():
            c = self.config
            connection: Any
            if self.vendor == "sqlite":
                private_dir(Path(c["NAME"]).parent)
                existed = Path(c["NAME"]).exists()
                connection = sqlite3.connect(c["NAME"], timeout=20, isolation_level=None)
                if not existed:
                    os.chmod(c["NAME"], 0o600)
            else:
                import psycopg

                connection = psycopg.connect(
                    dbname=c["NAME"],
                    user=c.get("USER") or None,
                    password=c.get("PASSWORD") or None,
                    host=c.get("HOST") or None,
                    port=c.get("PORT") or None,
                    autocommit=True,
                )
            cursor = connection.cursor()
            for statement in _TABLES:
                cursor.execute(statement)
            self._connection, self._pid = connection, os.getpid()
        return self._connection.cursor()

    def _sql(self, statement: str) -> str:
        return statement.replace("%s", "?") if self.vendor == "sqlite" else statement

    @contextlib.contextmanager
    def _transaction(self, lock: str) -> Iterator[Any]:
        """One writer at a time across processes and nodes: an advisory lock (PostgreSQL) or
        the write lock (SQLite), for the transaction. Nested uses join it."""
        with self._lock:
            cursor = self._cursor()
            if self._depth:
                self._depth += 1
                try:
                    yield cursor
                finally:
                    self._depth -= 1
                return
            if self.vendor == "sqlite":
                cursor.execute("BEGIN IMMEDIATE")
            else:
                cursor.execute("BEGIN")
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(lock.encode())])
            self._depth = 1
            try:
                yield cursor
                cursor.execute("COMMIT")
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0

    # --- entries ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def entries_locked(self) -> Iterator[None]:
        with self._transaction("memoryproject_witness_entry"):
            yield

    def entries_read(self, cursor: Any) -> tuple[Any, list[bytes], bool]:
        """Rows after ``cursor`` (the last n read); every row again (``reset``) when rows were
        removed or renumbered behind it."""
        with self._lock:
            db = self._cursor()
            db.execute("SELECT COUNT(*), COALESCE(MAX(n), 0) FROM memoryproject_witness_entry")
            count, top = db.fetchone()
            after = int(cursor or 0)
            reset = top < after or count != top
            if reset:
                after = 0
            db.execute(
                self._sql(
                    "SELECT n, line FROM memoryproject_witness_entry WHERE n > %s ORDER BY n"
                ),
                [after],
            )
            rows = db.fetchall()
        last = rows[-1][0] if rows else after
        return last, [str(line).encode("utf-8") for _, line in rows], reset

    def entry_write(self, n: int, line: bytes) -> None:
        with self._transaction("memoryproject_witness_entry") as db:
            db.execute(
                self._sql("INSERT INTO memoryproject_witness_entry (n, line) VALUES (%s, %s)"),
                [n, line.decode("utf-8")],
            )

    # --- heads --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def head_locked(self, stream: str) -> Iterator[None]:
        with self._transaction(f"memoryproject_witness_head:{stream}"):
            yield

    def head_lines(self, stream: str) -> list[bytes]:
        with self._lock:
            db = self._cursor()
            db.execute(
                self._sql("SELECT line FROM memoryproject_witness_head WHERE stream = %s"),
                [stream],
            )
            rows = db.fetchall()
        return [str(row[0]).encode("utf-8") for row in rows]

    def head_write(self, stream: str, line: bytes, newest: int | None) -> None:
        import json

        seq = int(json.loads(line)["body"]["seq"])
        with self._transaction(f"memoryproject_witness_head:{stream}") as db:
            db.execute(
                self._sql(
                    "INSERT INTO memoryproject_witness_head (stream, seq, line) VALUES (%s, %s, %s) "
                    "ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, line = excluded.line"
                ),
                [stream, seq, line.decode("utf-8")],
            )

    def streams(self) -> list[str]:
        with self._lock:
            db = self._cursor()
            db.execute("SELECT stream FROM memoryproject_witness_head")
            return [str(row[0]) for row in db.fetchall()]
