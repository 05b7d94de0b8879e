"""Concurrent writers of one singular predicate: the graph lock serialises them into a single
linear supersession chain, and the database never holds two active truths."""

import threading

import pytest
from django.db import connection, connections

from graph_app import graph_head, integrity
from graph_app.fact_writes import fact_upsert
from graph_app.models import TemporalFact
from memoryproject.models import Project

WRITERS = 8


# available_apps: the flush after the test empties only the graph's tables, so the
# migration-created default project survives for the tests that run after this one.
@pytest.mark.django_db(transaction=True, available_apps=["graph_app"])
def test_eight_concurrent_upserts_leave_one_active_fact_and_a_linear_chain():
    # On SQLite, IMMEDIATE transactions serialise writers at BEGIN (busy timeout 20 s), so the
    # same guarantee holds there and the test runs on both databases.
    # get_or_create: an earlier transactional test's flush may have removed the migration's row.
    project, _ = Project.objects.get_or_create(slug="default")
    barrier = threading.Barrier(WRITERS)
    results: list[dict] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        try:
            barrier.wait()
            result = fact_upsert(
                project=project,
                subject_id="auth_service",
                predicate="uses_token_format",
                object_value=f"FORMAT_{i}",
            )
            with lock:
                results.append(result)
        except BaseException as exc:  # collected and asserted below
            with lock:
                errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert len(results) == WRITERS and all(r["created"] for r in results)
    facts = {f.id: f for f in TemporalFact.objects.all()}
    assert len(facts) == WRITERS
    active = [f for f in facts.values() if f.valid_until is None]
    assert len(active) == 1

    # Walk the chain from the one fact nothing supersedes into: it must visit every write once.
    successors = {f.id: f.superseded_by_id for f in facts.values()}
    targets = {s for s in successors.values() if s}
    [head] = [fid for fid in facts if fid not in targets]
    chain = [head]
    while successors[chain[-1]]:
        chain.append(successors[chain[-1]])
    assert len(chain) == WRITERS and set(chain) == set(facts)
    assert chain[-1] == active[0].id
    assert sorted(f.object_value for f in facts.values()) == sorted(
        f"FORMAT_{i}" for i in range(WRITERS)
    )
    # Each closed fact ends where its successor starts.
    for fid, nxt in successors.items():
        if nxt:
            assert facts[fid].valid_until == facts[nxt].valid_from
    assert graph_head.graph_head(project).revision == WRITERS
    assert integrity.integrity_verify(project=project)["verified"] is True
    connection.close()
