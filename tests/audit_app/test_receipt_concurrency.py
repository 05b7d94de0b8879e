"""Eight threads of fifty deliveries each, plans and compiles mixed, leave one contiguous,
verifiable chain (the head-row lock on PostgreSQL, the IMMEDIATE write lock on SQLite)."""

import threading

import pytest
from django.db import connection

from audit_app.models import InjectionRecord, audit_maintenance
from audit_app.selectors import injection_log_verify
from graph_app.delivery import context_deliver
from graph_app.index_cache import compiler_cache_forget
from memoryproject.contracts import Caller
from memoryproject.models import Project
from sessions_app.plan import plan_context

THREADS = 8
CALLS = 50


@pytest.fixture
def committed():
    project = Project.objects.create(slug="receipt-race", name="receipt-race")
    try:
        yield project
    finally:
        compiler_cache_forget(project.pk)
        with audit_maintenance():
            InjectionRecord.objects.filter(project=project).delete()
        Project.objects.filter(pk=project.pk).delete()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True, available_apps=["audit_app", "sessions_app", "graph_app"])
def test_concurrent_plans_and_compiles_append_one_chain(committed):
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)
    caller = Caller(channel="test", client="race")

    def worker(index: int) -> None:
        try:
            start.wait()
            for call in range(CALLS):
                if (index + call) % 2:
                    plan_context(project=committed, mode="dry_run", caller=caller)
                else:
                    context_deliver(project=committed, query=f"race {call}", caller=caller)
        except BaseException as exc:  # an exception in a thread is otherwise lost
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    records = InjectionRecord.objects.order_by("seq")
    assert list(records.values_list("seq", flat=True)) == list(range(1, THREADS * CALLS + 1))
    sources = set(records.values_list("source", flat=True))
    assert sources == {"plan", "compile"}
    result = injection_log_verify()
    assert (result["ok"], result["checked"]) == (True, THREADS * CALLS)
