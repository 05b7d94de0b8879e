"""Two instances of the REST API's server on one database, the way users grow past one
machine: clients of both write at once — plans that append receipts, and upserts of the same
singular predicates on the same subject. Afterwards the injection log is one contiguous chain and each singular
predicate has exactly one active fact."""

from __future__ import annotations

import pytest

from benchmarks.loadtest import LoadOptions, Workload, target_prepare, verify_all
from benchmarks.loadtest.run import run_for, start_servers
from benchmarks.loadtest.verify import Reader, writes_missing
from benchmarks.loadtest.workload import PREDICATES

pytestmark = pytest.mark.slow


def test_two_servers_on_one_database_keep_one_chain_and_one_truth(load_database_url, tmp_path):
    target = target_prepare(load_database_url("two"))
    servers = start_servers(target, LoadOptions(servers=2, workers=2, threads=4), tmp_path)
    workload = Workload(
        ports=[s.port for s in servers],
        key=target.write_key,
        clients=8,
        mix={"plan": 2, "upsert": 3, "trace": 1},
        subjects=1,
        seed=2,
    )
    try:
        run_for(workload, 8, progress=False)
        check = verify_all(target, servers[1].port, workload.ledger)
        reader = Reader(servers[0].port, target.admin_key, target.project)
        status, closed = reader.get("/v1/graph/facts", subject="svc_0", active="false", limit=1)
        # The check can fail: a receipt the service never wrote is reported lost.
        workload.ledger.add([("receipts", 10**9)])
        never_written = writes_missing(reader, workload.ledger)
    finally:
        workload.stop()
        for server in servers:
            server.stop()

    # Both servers took writes, all of them answered.
    assert set(workload.stats.by_port) == {s.port for s in servers}
    assert min(workload.stats.by_port.values()) > 20
    for name, stats in workload.stats.endpoints.items():
        assert set(stats.statuses) <= {200, 201}, (name, stats.statuses, stats.samples)
        assert not stats.errors, (name, stats.errors)
    # One chain: every receipt from either server in it, seqs without a gap, hashes verified.
    assert check.acknowledged["receipts"] > 20
    assert check.lost == {}, check.lost
    assert check.injection_log["ok"], check.injection_log
    assert check.injection_log["checked"] == check.acknowledged["receipts"]
    assert check.seqs_contiguous
    # One truth: the same subject's singular predicates were superseded across servers, and
    # each still has exactly one active fact.
    assert check.singular_pairs == len(PREDICATES)
    assert check.singular_violations == []
    assert status == 200 and closed["count"] > 0
    assert check.graph["verified"], check.graph
    assert never_written == {"receipts": [str(10**9)]}
