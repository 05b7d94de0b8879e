"""The database a load test runs on: its own (named ``memory_load…``), dropped and created
afresh, migrated, with one write key for the clients and one admin key for the auditor. Every
step is a ``manage.py`` command in a child process with the target's environment."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from memoryproject.dbconfig import database_url_parse

REPO = Path(__file__).resolve().parents[2]
NAME_PREFIX = "memory_load"
DEFAULT_POSTGRES_URL = f"postgres://postgres@127.0.0.1:5432/{NAME_PREFIX}"
PROJECT = "load"


class LoadTestError(Exception):
    """The load test could not be set up or run (not a finding about the service)."""


@dataclass(frozen=True)
class Target:
    """A prepared database: its URL, the environment of every process that serves it, and
    the keys (``write`` for clients, ``admin`` for verification) of project ``project``."""

    database_url: str
    env: dict[str, str]
    project: str
    write_key: str
    admin_key: str

    @property
    def vendor(self) -> str:
        return database_vendor(self.database_url)


def database_vendor(url: str) -> str:
    engine = str(database_url_parse(url)["ENGINE"])
    if "postgresql" in engine:
        return "postgresql"
    if "sqlite" in engine:
        return "sqlite"
    raise LoadTestError(f"database url: only PostgreSQL and SQLite are supported, got {engine}")


def default_database_url() -> str:
    """LOADTEST_DATABASE_URL; else a ``memory_load`` database on the PostgreSQL server
    DATABASE_URL names; else on the local PostgreSQL (127.0.0.1:5432)."""
    explicit = os.environ.get("LOADTEST_DATABASE_URL", "").strip()
    if explicit:
        return explicit
    current = os.environ.get("DATABASE_URL", "").strip()
    if current and database_vendor(current) == "postgresql":
        return _with_database(current, NAME_PREFIX)
    return DEFAULT_POSTGRES_URL


def url_normalized(url: str) -> str:
    """A SQLite URL with a relative path made absolute (servers run from the repository)."""
    if database_vendor(url) != "sqlite":
        return url
    name = str(database_url_parse(url)["NAME"] or "")
    if not name or name == ":memory:":
        raise LoadTestError("database url: a SQLite load test needs a file")
    return f"sqlite:///{Path(name).resolve()}"


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}", query=""))


def _database_name(url: str) -> str:
    name = str(database_url_parse(url)["NAME"] or "")
    stem = Path(name).stem if database_vendor(url) == "sqlite" else name
    if not stem.startswith(NAME_PREFIX):
        raise LoadTestError(
            f"database url: the database's name must start with {NAME_PREFIX!r} (it is dropped "
            f"and created afresh), got {name!r}"
        )
    return name


def _postgres_admin(url: str) -> Any:
    """An autocommit connection to the server's maintenance database."""
    import psycopg

    try:
        return psycopg.connect(_with_database(url, "postgres"), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise LoadTestError(
            f"PostgreSQL is not reachable at {_redacted(url)} ({exc}); start it, or name "
            "another database with --database-url or LOADTEST_DATABASE_URL (a SQLite file "
            "works too: sqlite:///data/memory_load.sqlite3)"
        ) from exc


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{host}{port}"))


def postgres_reachable(url: str = DEFAULT_POSTGRES_URL) -> bool:
    try:
        _postgres_admin(url).close()
    except LoadTestError:
        return False
    return True


def database_drop(url: str) -> None:
    """Drops the load test's database (a ``memory_load…`` name only)."""
    name = _database_name(url)
    if database_vendor(url) == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(name + suffix).unlink(missing_ok=True)
        return
    from psycopg import sql

    with _postgres_admin(url) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def database_create(url: str) -> None:
    """Drops and creates the load test's database, empty."""
    database_drop(url)
    name = _database_name(url)
    if database_vendor(url) == "sqlite":
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        return
    from psycopg import sql

    with _postgres_admin(url) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def child_env(database_url: str) -> dict[str, str]:
    """The environment of the servers and commands: production settings (DEBUG off) on the
    target database, over plain HTTP on the loopback address (no TLS proxy in front). A
    SECRET_KEY from the environment is kept, else one is made for the run."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        DATABASE_URL=database_url,
        DEBUG="0",
        PLAIN_HTTP="1",
        SECRET_KEY=env.get("SECRET_KEY") or secrets.token_urlsafe(50),
        LOG_LEVEL=env.get("LOADTEST_LOG_LEVEL", "WARNING"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("MEMORY_TEST_DB_SUFFIX", None)
    return env


def manage(
    env: dict[str, str], *args: str, timeout: float = 300, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Runs ``manage.py <args>`` in a child process with ``env``."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        raise LoadTestError(
            f"manage.py {' '.join(args[:1])} failed ({result.returncode}): "
            f"{(result.stderr or result.stdout).strip()[-2000:]}"
        )
    return result


def api_key_for(env: dict[str, str], *, name: str, project: str, scope: str) -> str:
    result = manage(
        env,
        "create_api_key",
        "--name",
        name,
        "--project",
        project,
        "--scope",
        scope,
        "--create-projects",
    )
    return result.stdout.strip().splitlines()[-1]


def target_prepare(database_url: str, *, project: str = PROJECT, fresh: bool = True) -> Target:
    """Creates (``fresh``: drops first) and migrates the database and makes the two keys."""
    env = child_env(database_url)
    if fresh:
        database_create(database_url)
        # A new database, a new witness: heads witnessed for the one dropped would be held
        # against this one.
        env["WITNESS_DIR"] = tempfile.mkdtemp(prefix="loadtest_witness_")
    manage(env, "migrate", "--noinput")
    with ThreadPoolExecutor(2) as pool:  # two Django start-ups at once
        write = pool.submit(
            api_key_for, env, name="loadtest clients", project=project, scope="write"
        )
        admin = pool.submit(
            api_key_for, env, name="loadtest auditor", project=project, scope="admin"
        )
        keys = write.result(), admin.result()
    return Target(
        database_url=database_url,
        env=env,
        project=project,
        write_key=keys[0],
        admin_key=keys[1],
    )
