"""Turns DATABASE_URL into Django's DATABASES entry (parsed by django-environ, which also reads
every other setting).

SQLite is the embedded default. Left to Django's defaults it answers "database is locked" to
concurrent writers; IMMEDIATE transactions, WAL and a busy timeout cure that. Every commit is
on disk before it is acknowledged: connections commit at ``synchronous=FULL`` (in WAL mode the
lighter NORMAL alone may lose the last transactions on a power loss or an operating-system
crash), and the service's writes, which take a write turn, commit at NORMAL and flush the log
themselves once their turn has passed (memoryproject.writes).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import environ

# Django's SQLite backend, placeholders converted once per statement (memoryproject.sqlite3).
SQLITE_ENGINE = "memoryproject.sqlite3"
_SQLITE_ENGINES = (SQLITE_ENGINE, "django.db.backends.sqlite3")

SQLITE_OPTIONS: dict[str, Any] = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": (
        "PRAGMA journal_mode=WAL;PRAGMA synchronous=FULL;"
        "PRAGMA busy_timeout=20000;PRAGMA foreign_keys=ON"
    ),
}


def is_sqlite(config: Mapping[str, Any]) -> bool:
    """Whether a database entry (settings or a parsed URL) is SQLite, by either backend."""
    return config.get("ENGINE") in _SQLITE_ENGINES


def is_sqlite_file(name: str) -> bool:
    """Whether a SQLite database NAME is a file of its own (not in memory, not a URI)."""
    return bool(name) and name != ":memory:" and not name.startswith("file:")


def default_sqlite_url(base_dir: Path) -> str:
    return f"sqlite:///{base_dir / 'data' / 'memoryproject.sqlite3'}"


def database_url_parse(url: str) -> dict[str, Any]:
    """A database URL (``sqlite:///path``, ``postgres://user:pw@host:port/name?option=...``) as
    Django's database settings: ENGINE, NAME, USER, PASSWORD, HOST, PORT and OPTIONS. An
    unknown scheme is a ValueError."""
    scheme = url.split("://", 1)[0]
    if scheme not in environ.Env.DB_SCHEMES:
        raise ValueError(f"database URL: scheme '{scheme}://' is unknown")
    return dict(environ.Env.db_url_config(url))


def database_config(url: str | None, *, base_dir: Path, conn_max_age: int = 0) -> dict[str, Any]:
    """The DATABASES['default'] entry for ``url`` (None or empty: the SQLite file in data/).

    ``conn_max_age`` seconds a request's connection is kept for the next one (0: closed after
    each request); a kept connection is checked before reuse, so a dropped one is replaced."""
    url = (url or "").strip() or default_sqlite_url(base_dir)
    config = database_url_parse(url)
    config.update(CONN_MAX_AGE=conn_max_age, CONN_HEALTH_CHECKS=conn_max_age > 0)
    if is_sqlite(config):
        config["ENGINE"] = SQLITE_ENGINE
        name = str(config.get("NAME") or "")
        if name and name != ":memory:":
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        config["OPTIONS"] = {**SQLITE_OPTIONS, **config.get("OPTIONS", {})}
    return config


def database_label(config: dict[str, Any]) -> str:
    """A file-system-safe name of one database (its witness directory is named after it, so
    two databases never share one): the SQLite file's stem, or ``<name>-<host>-<port>``."""
    if is_sqlite(config):
        raw = Path(str(config.get("NAME") or "memory")).stem
    else:
        parts = (config.get("NAME"), config.get("HOST") or "local", config.get("PORT") or "")
        raw = "-".join(str(part) for part in parts if part)
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in raw) or "database"


def database_url_of(config: Mapping[str, Any]) -> str:
    """A database URL for a new process on the database of ``config`` (a connection's
    settings: the test database while tests run), as ``database_url_parse`` reads it back."""
    if is_sqlite(config):
        return f"sqlite:///{Path(config['NAME']).resolve()}"
    user = quote(config.get("USER") or "postgres", safe="")
    password = f":{quote(config['PASSWORD'], safe='')}" if config.get("PASSWORD") else ""
    host = config.get("HOST") or "127.0.0.1"
    port = config.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{config['NAME']}"
