"""The REST API's server as deployed (``python -m memoryproject.server``) loads every
project's compiler index in its main process before it forks: workers start with it instead
of each building its own on its first compile. Read from the processes' own log lines (the
index says when it is built from the rows, loaded from a snapshot, or warmed, and in which
process)."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from benchmarks.loadtest.target import target_prepare
from tests.load.servers import started

pytestmark = pytest.mark.slow

BUILT = re.compile(
    r"compiler index of project (\S+) (built from \d+ rows|loaded from its snapshot)"
)


def _post(port, key, path, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, json.loads(answer.read())


def _serve(target, tmp_path, name, **env):
    return started(target, tmp_path, name, **{"LOG_LEVEL": "INFO", **env})


def _compile_on_every_worker(server, key):
    """Compiles until both workers have answered (the answers name no process: the log does)."""
    cited = []
    for _ in range(12):
        status, body = _post(server.port, key, "/v1/graph/compile", {"query": "ledger_writer"})
        assert status == 200
        cited.append({item["citation"] for item in body["items"]})
    return cited


def _index_lines(log_text):
    """(pid, project, how) of every index built or loaded, from the log."""
    found = []
    for line in log_text.splitlines():
        match = BUILT.search(line)
        if match:
            pid = int(re.search(r"in process (\d+)", line).group(1))
            found.append((pid, match.group(1), match.group(2).split(" ")[0]))
    return found


def test_workers_start_with_the_index_the_main_process_warmed(load_database_url, tmp_path):
    target = target_prepare(load_database_url("warm"))
    first = _serve(target, tmp_path, "first")
    try:
        for i in range(20):
            status, _ = _post(
                first.port,
                target.write_key,
                "/v1/graph/facts",
                {"subject_id": "ledger_writer", "predicate": f"rule_{i}", "object_value": f"v{i}"},
            )
            assert status == 201
    finally:
        first.stop()

    # As deployed: the main process warms the index, then forks.
    warm = _serve(target, tmp_path, "warm")
    try:
        cited = _compile_on_every_worker(warm, target.write_key)
        main = warm.process.pid
    finally:
        warm.stop()
    log = (tmp_path / "warm.log").read_text()
    assert all(len(c) == 20 for c in cited)  # every fact, from every worker
    warmed = [line for line in log.splitlines() if f"indexes warmed in process {main}:" in line]
    assert warmed and f"'{target.project}': 20" in warmed[0]  # at the 20th fact's revision
    lines = _index_lines(log)
    assert lines and {pid for pid, _, _ in lines} == {main}, lines  # no worker built one

    # Without the preload each worker builds (or loads) its own on its first compile: the
    # check above can tell the two apart.
    cold = _serve(target, tmp_path, "cold", SERVER_PRELOAD="0")
    try:
        _compile_on_every_worker(cold, target.write_key)
        main = cold.process.pid
    finally:
        cold.stop()
    lines = _index_lines((tmp_path / "cold.log").read_text())
    assert lines and main not in {pid for pid, _, _ in lines}, lines
