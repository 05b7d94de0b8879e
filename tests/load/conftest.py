"""Load and crash tests run the REST API's server (``python -m memoryproject.server``) on a
database of their own: on PostgreSQL whenever one is reachable (the scale-out story: several
servers on one database), whatever database the rest of the suite runs on; else on a SQLite
file with the project's SQLite settings. The database is dropped afterwards."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from benchmarks.loadtest.target import (
    NAME_PREFIX,
    database_drop,
    database_vendor,
    default_database_url,
    postgres_reachable,
)


def postgres_server_url() -> str | None:
    """The PostgreSQL server of LOADTEST_DATABASE_URL, else of the suite's DATABASE_URL, else
    the local one; None when it does not answer (or LOADTEST_DATABASE_URL names SQLite)."""
    url = default_database_url()
    if database_vendor(url) != "postgresql" or not postgres_reachable(url):
        return None
    return url


def _suffix() -> str:
    raw = (
        os.environ.get("MEMORY_TEST_DB_SUFFIX", "")
        + "_"
        + os.environ.get("PYTEST_XDIST_WORKER", "")
    )
    return re.sub(r"[^a-z0-9_]", "", raw.lower()).strip("_")


@pytest.fixture
def load_database_url(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """A factory of database URLs for this test (``memory_load_test_<suffix>_<label>``),
    every one dropped afterwards."""
    made: list[str] = []
    server = postgres_server_url()

    def make(label: str) -> str:
        name = "_".join(p for p in (NAME_PREFIX, "test", _suffix(), label) if p)
        if server is not None:
            url = server.rsplit("/", 1)[0] + f"/{name}"
        else:
            url = f"sqlite:///{tmp_path / (name + '.sqlite3')}"
        made.append(url)
        return url

    yield make
    for url in made:
        database_drop(url)
