"""Full verification of a large project reads and hashes its facts in a second process
(graph_app.integrity_worker) on the verifying transaction's snapshot. Whatever the worker
answers must be what verification in one process answers, for an intact graph and for every
tampering, and verification must never depend on the worker starting or succeeding. (That
it reads the verifier's snapshot while writers commit: test_change_log_concurrency.)"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from graph_app import integrity
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.models import TemporalFact
from memoryproject.models import Project
from tests.conftest import on_postgres

# Transactional: the worker reads committed rows on its own connection. available_apps: the
# flush afterwards empties only the graph's tables.
pytestmark = pytest.mark.django_db(transaction=True, available_apps=["graph_app"])

WORKER = "graph_app.integrity_worker_client"


def _graph(project: Project) -> list[str]:
    ids = []
    for n in range(6):
        ids.append(
            fact_upsert(
                project=project,
                subject_id=f"service_{n % 3}",
                predicate="runs_on",
                object_value=f"runtime_{n}",  # singular: each supersedes the one before
                valid_from=f"2025-0{n + 1}-01T00:00:00Z",
            )["fact"]["id"]
        )
    ids.append(
        fact_upsert(
            project=project,
            subject_id="service_0",
            predicate="depends_on",
            object_value="ledger",
            object_entity="ledger",
            singular=False,
            confidence=0.7,
        )["fact"]["id"]
    )
    episode_record(
        project=project,
        title="Runtime moved",
        category="migration",
        content="service_0 moved to runtime_3.",
        files_touched=["deploy/runtime.yaml"],
        entities_mentioned=["service_0"],
    )
    return ids


@pytest.fixture
def project() -> Project:
    project, _ = Project.objects.get_or_create(slug="default")
    return project


def _verified(project: Project, *, worker: bool) -> dict[str, Any]:
    with override_settings(INTEGRITY_WORKER_MIN_CHANGES=1 if worker else 0):
        report = integrity.integrity_verify(project=project).as_json()
    report.pop("checked_at")
    return report


def _worker_said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "integrity worker" in r.getMessage()]


def _facts_read_apart(caplog: pytest.LogCaptureFixture) -> list[int]:
    """How many facts each worker that ran read (from its log line)."""
    said = (re.fullmatch(r"integrity worker \d+ read (\d+) facts", m) for m in _worker_said(caplog))
    return [int(m.group(1)) for m in said if m]


def test_the_worker_answers_what_verification_in_one_process_answers(project, caplog):
    ids = _graph(project)
    caplog.set_level(logging.DEBUG, logger=WORKER)

    apart = _verified(project, worker=True)

    assert _facts_read_apart(caplog) == [len(ids)]
    assert apart["verified"] is True and apart["facts"] == len(ids)
    assert apart == _verified(project, worker=False)


def _tamper(project: Project, ids: list[str]) -> None:
    facts = TemporalFact.objects.filter(project=project)
    facts.filter(id=ids[0]).update(object_value="runtime_forged")  # content edited
    facts.filter(id=ids[1]).update(sha256="0" * 64)  # its hash replaced
    later = facts.get(id=ids[2]).valid_from.replace(microsecond=1)
    facts.filter(id=ids[2]).update(valid_from=later)  # moved by a microsecond
    facts.filter(id=ids[3]).update(confidence=0.25)
    facts.filter(id=ids[4]).update(revision=10**6)  # a revision from the future
    table = TemporalFact._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f'DELETE FROM "{table}" WHERE id = %s', [ids[6]])  # behind its back
        if not on_postgres():
            # A value of another type than the column's, as only raw SQL can store it: the
            # worker must read it as the application's connection does.
            cursor.execute(f'UPDATE "{table}" SET singular = %s WHERE id = %s', ["yes", ids[5]])


def test_every_tampering_is_named_alike_with_or_without_the_worker(project, caplog):
    ids = _graph(project)
    _tamper(project, ids)
    caplog.set_level(logging.DEBUG, logger=WORKER)

    apart = _verified(project, worker=True)

    assert _facts_read_apart(caplog) == [len(ids) - 1]
    assert apart == _verified(project, worker=False)
    assert apart["verified"] is False
    named = set(apart["mismatched_ids"])
    assert {ids[0], ids[1], ids[2], ids[3], ids[4], ids[6]} <= named
    if not on_postgres():
        assert ids[5] in named


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false"])
def test_a_worker_that_cannot_start_or_fails_leaves_verification_to_the_process(
    project, caplog, monkeypatch, executable
):
    ids = _graph(project)
    TemporalFact.objects.filter(id=ids[0]).update(object_value="runtime_forged")
    monkeypatch.setattr(sys, "executable", executable)

    report = _verified(project, worker=True)

    assert [m for m in _worker_said(caplog) if m.endswith("facts read in process")]
    assert report["facts"] == len(ids) and report["mismatched_ids"] == [ids[0]]
    monkeypatch.undo()
    assert report == _verified(project, worker=False)


def test_inside_a_callers_transaction_verification_reads_its_uncommitted_writes_itself(
    project, caplog
):
    _graph(project)
    caplog.set_level(logging.DEBUG, logger=WORKER)
    with transaction.atomic():
        extra = fact_upsert(
            project=project, subject_id="service_9", predicate="owns", object_value="billing"
        )["fact"]["id"]
        report = _verified(project, worker=True)
        transaction.set_rollback(True)

    assert _worker_said(caplog) == []
    assert report["verified"] is True and report["facts"] == 8
    assert not TemporalFact.objects.filter(id=extra).exists()


def test_below_the_threshold_no_worker_starts(project, caplog):
    _graph(project)
    caplog.set_level(logging.DEBUG, logger=WORKER)
    with override_settings(INTEGRITY_WORKER_MIN_CHANGES=10_000):
        assert integrity.integrity_verify(project=project)["verified"] is True
    assert _worker_said(caplog) == []


def test_the_worker_starts_without_django():
    """Its start costs an interpreter and the canonical forms, not the application."""
    import subprocess

    probe = "import graph_app.integrity_worker, sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework', 'mcp')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
