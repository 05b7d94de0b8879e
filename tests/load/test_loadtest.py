"""`manage.py loadtest` as CI runs it: ten seconds of 16 concurrent clients over HTTP against
the REST API's server, then every acknowledged write found again and every verification passing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.loadtest.target import REPO
from benchmarks.loadtest.workload import DEFAULT_MIX

pytestmark = pytest.mark.slow


def loadtest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "loadtest", "--json", "--no-progress", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ten_second_load_loses_nothing_and_verifies(load_database_url, tmp_path):
    url = load_database_url("command")
    result = loadtest(
        "--duration", "10", "--drop", "--database-url", url, "--log-dir", str(tmp_path)
    )
    assert result.stdout.strip(), result.stderr
    report = json.loads(result.stdout)
    logs = "".join(p.read_text(errors="replace")[-2000:] for p in tmp_path.glob("server-*.log"))
    assert result.returncode == 0, json.dumps(report, indent=1)[-4000:] + logs

    assert report["ok"] is True
    assert report["options"]["clients"] == 16
    assert report["elapsed_s"] >= 10
    # Every kind of request was sent, answered 2xx, with no connection error.
    assert set(report["endpoints"]) == set(DEFAULT_MIX)
    for name, row in report["endpoints"].items():
        assert row["count"] > 0, name
        assert row["status_5xx"] == 0, (name, row["samples_5xx"])
        assert row["non_2xx"] == 0, (name, row["statuses"])
        assert row["errors"] == 0, (name, row["error_kinds"])
        assert 0 < row["p50_ms"] <= row["p99_ms"], name

    check = report["verification"]
    for kind in ("traces", "sessions", "facts", "episodes", "receipts"):
        assert check["acknowledged"][kind] > 0, kind
    assert check["lost_count"] == 0, check["lost"]
    assert check["singular_violations"] == []
    assert check["singular_pairs"] > 0
    assert check["injection_log"]["ok"] is True
    assert check["injection_log"]["checked"] >= check["acknowledged"]["receipts"]
    assert check["seqs_contiguous"] is True
    assert check["graph"]["verified"] is True
    assert check["graph"]["facts"] >= check["acknowledged"]["facts"]


def test_loadtest_refuses_a_database_it_would_drop_by_mistake():
    result = loadtest("--duration", "1", "--database-url", "postgres://postgres@127.0.0.1/prod")
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert "must start with 'memory_load'" in report["error"]


def test_loadtest_names_a_request_it_does_not_know():
    result = loadtest("--duration", "1", "--mix", "trace=2,delete=1")
    assert result.returncode == 2
    assert "mix: unknown request 'delete'" in json.loads(result.stdout)["error"]
