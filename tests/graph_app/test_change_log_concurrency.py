"""Concurrent writers give one contiguous change log, and verification running meanwhile reads
one consistent state: it never reports a write it saw only half of, also when a worker process
reads the facts on its own connection (graph_app.integrity_worker)."""

import threading
import time

import pytest
from django.db import connection, connections
from django.test import override_settings

from graph_app import integrity
from graph_app.fact_writes import fact_upsert
from graph_app.models import GraphChange
from memoryproject.models import Project
from memoryproject.reads import read_snapshot

WRITERS = 4
WRITES = 10


# available_apps: the flush after the test empties only the graph's tables (the migration's
# default project survives for the tests after this one).
@pytest.mark.django_db(transaction=True, available_apps=["graph_app"])
@pytest.mark.parametrize("worker", [False, True], ids=["one process", "fact worker"])
def test_concurrent_writes_chain_contiguously_and_verification_never_sees_half_a_write(worker):
    project, _ = Project.objects.get_or_create(slug="default")
    barrier = threading.Barrier(WRITERS + 1)
    errors: list[BaseException] = []
    reports: list[dict] = []
    done = threading.Event()

    def writer(i: int) -> None:
        try:
            barrier.wait()
            for n in range(WRITES):
                fact_upsert(
                    project=project,
                    subject_id=f"service_{i}",
                    predicate="depends_on",
                    object_value=f"library_{n}",
                    singular=False,
                )
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    def verifier() -> None:
        try:
            barrier.wait()
            with override_settings(INTEGRITY_WORKER_MIN_CHANGES=1 if worker else 0):
                while not done.is_set():
                    reports.append(integrity.integrity_verify(project=project).as_json())
                    # On SQLite verification holds the write lock while it reads, and SQLite's
                    # lock is not fair: back-to-back runs could starve the writers past their
                    # timeout.
                    time.sleep(0.005)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    checker = threading.Thread(target=verifier)
    for thread in [*threads, checker]:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    checker.join()
    connection.close()

    assert errors == []
    assert reports and all(r["verified"] for r in reports), [r["problems"] for r in reports]
    seqs = list(GraphChange.objects.filter(project=project).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, len(seqs) + 1))
    # The subjects, the libraries (shared: created once, by whichever writer came first) and
    # the edges.
    assert len(seqs) == WRITERS + WRITES + WRITERS * WRITES
    final = integrity.integrity_verify(project=project)
    assert final["verified"] is True and final["chain"]["size"] == len(seqs)


@pytest.mark.django_db(transaction=True, available_apps=["graph_app"])
def test_a_write_commits_while_verification_reads_and_verification_still_reads_one_state():
    """Verification's snapshot (``memoryproject.reads.read_snapshot``, which full verification and proofs
    read in) is a reader's: on SQLite it does not take the database's write lock, so a write
    meanwhile commits at once; and it still reads the state it began with."""
    from graph_app.models import TemporalFact

    project, _ = Project.objects.get_or_create(slug="default")
    fact_upsert(project=project, subject_id="svc", predicate="runs_on", object_value="a")
    committed = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            fact_upsert(project=project, subject_id="svc", predicate="owns", object_value="ledger")
            committed.set()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    facts = TemporalFact.objects.filter(project=project)
    with read_snapshot():
        before = facts.count()
        thread = threading.Thread(target=writer)
        thread.start()
        waited = committed.wait(10)  # an IMMEDIATE transaction here would make it wait
        inside = facts.count()
    thread.join()
    connection.close()
    assert errors == []
    assert waited, "the write waited for the verification's snapshot"
    assert inside == before == 1
    assert facts.count() == 2
