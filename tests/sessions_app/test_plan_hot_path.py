"""The /v1/plan hot path: what it reads, in which order, and through which index. Asserted on
the statements issued (never on timings)."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit_app.models import InjectionRecord, ReceiptSource
from audit_app.receipt_sources import receipt_sources_add
from memoryproject.dbconfig import database_config
from sessions_app.plan import plan_context
from sessions_app.selectors import trace_sha256
from tests.sessions_app.factories import TraceFactory

pytestmark = pytest.mark.django_db

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite's write lock and query planner"
)


def _plan_statements(project) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        body = plan_context(project=project, n=5)
    assert body["status"] == "injected"
    return [q["sql"] for q in captured.captured_queries]


@sqlite_only
@pytest.mark.django_db(transaction=True)  # the plan's own transaction, not a savepoint
def test_plan_reads_and_scores_traces_before_taking_the_write_lock(default_project):
    TraceFactory.create_batch(8, project=default_project)
    statements = _plan_statements(default_project)
    begin = next(i for i, sql in enumerate(statements) if sql.startswith("BEGIN IMMEDIATE"))
    recent = next(
        i
        for i, sql in enumerate(statements)
        if 'FROM "sessions_app_trace"' in sql and "LIMIT 5" in sql
    )
    assert recent < begin
    # Inside the lock: the claim, the chained receipt and its sources, nothing that reads the
    # project's recent traces again.
    inside = statements[begin:]
    assert not any('FROM "sessions_app_trace"' in sql and "LIMIT" in sql for sql in inside)
    assert any('INSERT INTO "audit_app_injectionrecord"' in sql for sql in inside)


def test_plan_links_its_receipt_to_the_traces_it_read_without_reading_them_again(
    default_project,
):
    traces = TraceFactory.create_batch(6, project=default_project)
    statements = _plan_statements(default_project)
    assert sum('FROM "sessions_app_trace"' in sql for sql in statements) == 1
    record = InjectionRecord.objects.get()
    linked = dict(ReceiptSource.objects.filter(record=record).values_list("item_id", "trace_id"))
    by_id = {str(t.trace_id): t.pk for t in traces}
    assert len(linked) == 5 and all(linked[item] == by_id[item] for item in linked)


@sqlite_only
def test_receipt_source_lookup_uses_the_unique_trace_index(default_project):
    """Where a receipt's sources are looked up (the caller did not just read them), the
    delivered traces are read by (project, trace_id), not along the recency index."""
    TraceFactory.create_batch(30, project=default_project)
    plan_context(project=default_project, n=5)
    record = InjectionRecord.objects.get()
    with CaptureQueriesContext(connection) as captured:
        receipt_sources_add(record, record.items)
    lookup = next(
        q["sql"]
        for q in captured.captured_queries
        if 'FROM "sessions_app_trace"' in q["sql"]
        and '"sessions_app_trace"."trace_id" IN' in q["sql"]
    )
    with connection.cursor() as cursor:
        plan = " ".join(row[-1] for row in cursor.execute(f"EXPLAIN QUERY PLAN {lookup}"))
    assert "trace_id=?" in plan and "trace_project_recent" not in plan


def test_connections_are_kept_between_requests_when_configured(tmp_path):
    kept = database_config(None, base_dir=tmp_path, conn_max_age=60)
    assert kept["CONN_MAX_AGE"] == 60 and kept["CONN_HEALTH_CHECKS"] is True
    closed = database_config(None, base_dir=tmp_path)
    assert closed["CONN_MAX_AGE"] == 0 and closed["CONN_HEALTH_CHECKS"] is False


def _trace_hashes(record: InjectionRecord) -> dict[str, str]:
    return {i["id"]: i["sha256"] for i in record.items if i["kind"] == "trace"}


def test_a_trace_changed_in_the_database_is_hashed_anew_by_the_next_plan(default_project):
    """Plans keep each trace row's hash in memory, under the row as stored: a row edited
    behind the service's back (a tampered column) is read and hashed again, never answered
    from memory, so the receipt records what was really delivered."""
    traces = TraceFactory.create_batch(3, project=default_project)
    first = plan_context(project=default_project, n=3)
    again = plan_context(project=default_project, n=3)
    records = list(InjectionRecord.objects.order_by("seq"))
    assert _trace_hashes(records[0]) == _trace_hashes(records[1])
    newest = traces[-1]
    metadata = {**newest.metadata, "last_decision": "switch the queue to kafka"}
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sessions_app_trace SET metadata = %s WHERE id = %s",
            [json.dumps(metadata), newest.pk],
        )
    newest.refresh_from_db()
    changed = plan_context(project=default_project, n=3)
    record = InjectionRecord.objects.order_by("seq").last()
    hashes = _trace_hashes(record)
    assert hashes[str(newest.trace_id)] == trace_sha256(newest)
    assert hashes[str(newest.trace_id)] != _trace_hashes(records[0])[str(newest.trace_id)]
    others = [str(t.trace_id) for t in traces[:-1]]
    assert all(hashes[t] == _trace_hashes(records[0])[t] for t in others)
    assert "switch the queue to kafka" in changed["system_prompt"]
    assert "switch the queue to kafka" not in first["system_prompt"] + again["system_prompt"]
