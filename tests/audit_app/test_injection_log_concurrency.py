"""Concurrent plan calls each get their own consecutive seq and a valid link in the chain (the
head-row lock on PostgreSQL, the IMMEDIATE write lock on SQLite)."""

import fcntl
import os
import threading

import pytest
from django.db import connection

from audit_app.models import InjectionRecord, audit_maintenance
from audit_app.selectors import injection_log_verify
from memoryproject.models import Project
from sessions_app.plan import plan_context

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


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's writer lock file")
@pytest.mark.django_db(transaction=True, available_apps=["audit_app", "sessions_app"])
def test_a_plan_waits_its_turn_behind_another_process_writing_the_same_file(committed):
    """Another process holding the writer lock (``<database>-writer``; a second open file is a
    second holder to flock, as another process's would be) makes a plan wait for its turn,
    rather than meet SQLite's busy lock, and it goes through as soon as the lock is released."""
    path = f"{connection.settings_dict['NAME']}-writer"
    other = os.open(path, os.O_RDWR | os.O_CREAT)
    done = threading.Event()
    errors: list[BaseException] = []

    def plan() -> None:
        try:
            plan_context(project=committed, mode="dry_run", channel="test", client="turn")
            done.set()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        thread = threading.Thread(target=plan)
        thread.start()
        assert not done.wait(0.5), "the plan wrote while another process held the writer lock"
        assert InjectionRecord.objects.filter(project=committed).count() == 0
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    thread.join(10)
    assert errors == [] and done.is_set()
    assert InjectionRecord.objects.filter(project=committed).count() == 1
