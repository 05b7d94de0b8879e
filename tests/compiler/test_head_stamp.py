"""A compile reads the graph's head again only when the database may have changed: on SQLite,
while no connection committed and this one wrote nothing, the head it read last still holds.
Every write is seen by the next compile: its own connection's, another connection's (another
thread, as another process's commit moves the same stamp)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from graph_app.compiler import context_compile
from graph_app.fact_writes import fact_upsert
from graph_app.graph_head import graph_head_statement
from graph_app.index_cache import compiler_cache_clear

QUERY = "what does payment_service depend on"


@pytest.fixture(autouse=True)
def _fresh_cache():
    compiler_cache_clear()
    yield
    compiler_cache_clear()


def _depends(project, value: str) -> None:
    fact_upsert(
        project=project, subject_id="payment_service", predicate="depends_on", object_value=value
    )


def _compile(project) -> str:
    return context_compile(project=project, query=QUERY, max_tokens=600)["markdown"]


def _head_reads(project) -> int:
    head_sql = graph_head_statement(project)[0]
    with CaptureQueriesContext(connection) as captured:
        _compile(project)
    return sum(q["sql"].startswith(head_sql.split(" WHERE ")[0]) for q in captured.captured_queries)


@pytest.mark.django_db
def test_a_compile_after_no_write_does_not_read_the_head_again(default_project):
    if connection.vendor != "sqlite":
        pytest.skip("the change stamp is SQLite's (PRAGMA data_version)")
    _depends(default_project, "ledger_store")
    assert _head_reads(default_project) == 1
    assert _head_reads(default_project) == 0
    _depends(default_project, "auth_service")  # this connection's own write
    assert _head_reads(default_project) == 1


@pytest.mark.django_db
def test_a_write_on_the_same_connection_is_seen_by_the_next_compile(default_project):
    _depends(default_project, "ledger_store")
    assert "ledger_store" in _compile(default_project)
    _depends(default_project, "billing_api")
    assert "billing_api" in _compile(default_project)


@pytest.mark.django_db(transaction=True)
def test_a_commit_by_another_connection_is_seen_by_the_next_compile(default_project):
    _depends(default_project, "ledger_store")
    assert "billing_api" not in _compile(default_project)
    _compile(default_project)  # the head held: not read again

    def elsewhere() -> None:
        try:
            _depends(default_project, "billing_api")
        finally:
            connections.close_all()

    writer = threading.Thread(target=elsewhere)
    writer.start()
    writer.join()
    assert "billing_api" in _compile(default_project)
