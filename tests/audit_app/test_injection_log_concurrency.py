"""Concurrent plan calls each get their own consecutive seq and a valid link in the chain (the
head-row lock on PostgreSQL, the IMMEDIATE write lock on SQLite)."""

import threading

import pytest
from django.db import connection

from audit_app.models import InjectionRecord, audit_maintenance
from audit_app.selectors import injection_log_verify
from memoryproject.models import Project
from sessions_app.services import plan_context

WORKERS = 4
CALLS = 8


@pytest.fixture
def committed():
    """A project whose writes really commit, so every thread sees them; removed afterwards."""
    project = Project.objects.create(slug="chain-race", name="chain-race")
    try:
        yield project
    finally:
        # The log is append-only: removing this test's records takes the maintenance gate.
        with audit_maintenance():
            InjectionRecord.objects.filter(project=project).delete()
        Project.objects.filter(pk=project.pk).delete()


# Transactional, so threads see each other's commits. The flush that ends a transactional test
# is limited to the apps this test writes, so the rows that data migrations created (the
# default project) survive for the tests that run after it.
@pytest.mark.django_db(transaction=True, available_apps=["audit_app", "sessions_app"])
def test_concurrent_plans_append_an_unbroken_chain(committed):
    errors: list[BaseException] = []
    start = threading.Barrier(WORKERS)

    def worker() -> None:
        try:
            start.wait()
            for _ in range(CALLS):
                plan_context(project=committed, mode="dry_run", channel="test", client="race")
        except BaseException as exc:  # collected: an exception in a thread is otherwise lost
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    seqs = list(InjectionRecord.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, WORKERS * CALLS + 1))
    result = injection_log_verify()
    assert (result["ok"], result["checked"], result["first_broken"]) == (
        True,
        WORKERS * CALLS,
        None,
    )
