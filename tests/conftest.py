"""Shared fixtures: projects, API keys and authenticated REST clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest
from django.db import connection, connections, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from rest_framework.test import APIClient

from memoryproject.models import Project, ProjectAPIKey
from memoryproject.services import api_key_create


@contextmanager
def _flush_gate(alias: str) -> Iterator[None]:
    """The gate held for a test flush, leaving nothing behind: a flush limited to some apps
    (``available_apps``) would keep a grant row of its own, which every later verification
    names as a grant the witness never signed. SQLite's triggers ask this thread; PostgreSQL's
    want a grant row of the transaction, removed again before it commits."""
    from memoryproject.append_only import gate_held

    connection = connections[alias]
    postgres = connection.vendor == "postgresql"
    grants = "audit_app_auditmaintenancegrant"
    with transaction.atomic(using=alias), gate_held(alias):
        if postgres:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {grants} (created_at, purpose, txid, witness_n, body) "
                    "VALUES (now(), 'test flush', txid_current(), 0, '{}')"
                )
        yield
        if postgres:
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {grants} WHERE txid = txid_current()")


@pytest.fixture(scope="session", autouse=True)
def _flush_opens_the_audit_gate() -> Iterator[None]:
    """Transactional tests end with a flush (DELETE on SQLite, TRUNCATE on PostgreSQL) that the
    injection log's append-only triggers refuse: the suite's flush holds their maintenance
    gate, inside the flush's own transaction (a flush is no maintenance of the service's: it
    is not witnessed)."""
    flush = BaseDatabaseOperations.execute_sql_flush

    def execute_sql_flush(self: BaseDatabaseOperations, sql_list: list[str]) -> None:
        with _flush_gate(self.connection.alias):
            flush(self, sql_list)

    BaseDatabaseOperations.execute_sql_flush = execute_sql_flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseDatabaseOperations.execute_sql_flush = flush  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _own_witness(tmp_path_factory, settings, monkeypatch) -> Iterator[None]:
    """Each test's witness is its own directory, as its database is its own: a head witnessed
    by one test must not be held against the next one's (rolled back or flushed) database.
    Exported in the environment so that servers the test starts witness there too."""
    directory = tmp_path_factory.mktemp("witness")
    settings.WITNESS_DIR = str(directory)
    monkeypatch.setenv("WITNESS_DIR", str(directory))
    yield


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Each test starts with an empty cache: failed authentications counted by one test (all
    from the test client's address) must not throttle the next, nor its failed console logins
    (counted by django-axes's cache handler in ``AXES_CACHE``) lock the next one out."""
    from django.conf import settings
    from django.core.cache import cache, caches

    cache.clear()
    caches[settings.AXES_CACHE].clear()
    yield


@pytest.fixture
def make_key(db) -> Callable[..., tuple[ProjectAPIKey, str]]:
    def _make(
        scope: str = "write", projects: Sequence[str] = ("default",), name: str = "test key"
    ) -> tuple[ProjectAPIKey, str]:
        return api_key_create(
            name=name, project_slugs=list(projects), scope=scope, create_projects=True
        )

    return _make


@pytest.fixture
def client_for(make_key) -> Callable[..., APIClient]:
    """An APIClient sending ``Authorization: Bearer <key>`` for a new key."""

    def _client(scope: str = "write", projects: Sequence[str] = ("default",)) -> APIClient:
        _, key = make_key(scope=scope, projects=projects)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return _client


@pytest.fixture
def api(client_for) -> APIClient:
    """A write-scoped client for the default project."""
    return client_for("write", ("default",))


@pytest.fixture
def default_project(db) -> Project:
    # get_or_create: a transactional test's flush removes the row the migration made.
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default project"})
    return project


def on_postgres() -> bool:
    return connection.vendor == "postgresql"
