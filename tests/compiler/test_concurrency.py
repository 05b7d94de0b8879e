"""The per-project index is shared by the threads of one process."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from graph_app.compiler import context_compile
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear
from memoryproject.models import Project

QUERIES = ["auth_service token format", "ledger balance invariant", "billing export schedule"]


# Threads need committed rows; available_apps limits the flush afterwards to the graph's tables,
# so the project rows created by migrations stay for the tests that follow.
@pytest.mark.django_db(transaction=True, available_apps=["graph_app"])
def test_concurrent_compiles_on_a_cold_cache_agree_with_a_serial_run():
    # get_or_create: an earlier transactional test's flush may have removed the migration's row.
    project, _ = Project.objects.get_or_create(slug="default")
    for i in range(30):
        fact_upsert(
            project=project,
            subject_id=f"service_{i % 7}",
            predicate="uses_token_format",
            object_value=f"format_{i}",
        )
        episode_record(
            project=project,
            title=f"Ledger note {i}",
            category="invariant" if i % 2 else "session_note",
            content=f"payment_ledger balance invariant number {i}; billing export at 0{i % 9}:00",
        )
    serial = [context_compile(project=project, query=q) for q in QUERIES]
    compiler_cache_clear()

    results: list[list[dict]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker() -> None:
        try:
            start.wait()
            results.append([context_compile(project=project, query=q) for q in QUERIES])
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 8
    assert all(result == serial for result in results)
