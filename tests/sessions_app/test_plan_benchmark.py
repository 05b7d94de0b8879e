"""plan_benchmark reports /v1/plan latency through the service and the REST view, and side by
side with the CognOS gateway over HTTP (shape and correctness only: timings are for the
command's reader, never asserted)."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.plan.peer import peer_missing
from sessions_app.models import Trace

pytestmark = pytest.mark.django_db


def test_json_output_reports_both_paths_and_the_index():
    out = StringIO()
    call_command(
        "plan_benchmark", "--in-place", "--traces", "30", "--iterations", "3", "--json", stdout=out
    )
    result = json.loads(out.getvalue())
    assert result["traces"] == 30 and result["iterations"] == 3
    assert result["database_mode"] == "in-place"
    for path in ("service_ms", "rest_ms"):
        assert set(result[path]) == {"p50", "p95", "mean", "max"}
        assert 0 < result[path]["p50"] <= result[path]["p95"] <= result[path]["max"]
    assert result["statuses"] == {"injected": 6}
    assert isinstance(result["meets_target"], bool)
    # The traces the plans delivered stay: receipts point to them (evidence is never deleted).
    assert Trace.objects.filter(project__slug="bench-plan").count() == result["n"]


def test_table_output_is_readable():
    out = StringIO()
    call_command("plan_benchmark", "--in-place", "--traces", "10", "--iterations", "2", stdout=out)
    text = out.getvalue()
    assert "p50 ms" in text and "REST (in-process)" in text and "service" in text


# ---- --against: side by side with the CognOS gateway over HTTP ------------------------------

PEER_DIR = Path(__file__).resolve().parents[3] / "shared" / "peers" / "cognos-gateway"


def test_against_an_absent_directory_skips_with_a_message(tmp_path):
    missing = tmp_path / "no-such-gateway"
    out = StringIO()
    call_command("plan_benchmark", "--against", str(missing), "--json", stdout=out)
    result = json.loads(out.getvalue())  # one JSON object, nothing else
    assert result["skipped"] == f"{missing} does not exist"
    text = StringIO()
    call_command("plan_benchmark", "--against", str(tmp_path), stdout=text)
    assert text.getvalue() == (
        f"plan_benchmark --against skipped: {tmp_path} holds no src/main.py "
        "(not a CognOS gateway copy)\n"
    )


def test_against_refuses_a_run_without_rounds():
    if peer_missing(PEER_DIR):
        pytest.skip(f"the CognOS gateway copy is not beside the checkout ({PEER_DIR})")
    with pytest.raises(CommandError, match="--rounds"):
        call_command("plan_benchmark", "--against", str(PEER_DIR), "--rounds", "0")


@pytest.mark.skipif(
    bool(peer_missing(PEER_DIR)), reason="no CognOS gateway copy beside the checkout"
)
def test_side_by_side_run_serves_both_and_receipts_every_plan(tmp_path):
    """A short real run: our server (granian, two workers, API key, receipts) and the peer's
    uvicorn with as many workers, the same load against each; every plan we answered wrote
    exactly one chained receipt."""
    out = StringIO()
    call_command(
        "plan_benchmark",
        "--against",
        str(PEER_DIR),
        "--load",
        "python",  # CI does not depend on wrk
        "--duration",
        "1",
        "--warmup",
        "0.5",
        "--rounds",
        "2",
        "--connections",
        "4",
        "--traces",
        "20",
        "--workdir",
        str(tmp_path),
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result["load"]["tool"] == "python" and result["load"]["rounds"] == 2
    assert result["ours"]["server"].startswith("granian, 2 workers")
    assert result["peer"]["server"].startswith("CognOS gateway, uvicorn, 2 worker(s)")
    for side in ("ours", "peer"):
        assert len(result[side]["runs"]) == 2
        assert result[side]["requests"] > 0 and result[side]["req_per_s"] > 0
        assert 0 < result[side]["p50_ms"] <= result[side]["p99_ms"]
    assert result["ours"]["non_2xx"] == 0
    assert result["receipts_written"] == result["ours_requests_total"]
    assert result["disk_commit_ms"] > 0
    assert len(result["ratios_per_round"]) == 2 and result["ratio_req_per_s"] > 0
    assert result["meets_target"] == (result["ratio_req_per_s"] >= 1.5)
    # Each of our two workers' memory, read after the warm-up and after the rounds.
    memory = result["ours_workers_memory"]
    for moment in ("after_warmup", "at_end"):
        assert len(memory[moment]) == 2
        assert all(0 < worker["pss_mb"] <= worker["rss_mb"] for worker in memory[moment])
    # Our server logged no error while it served the load.
    assert "Traceback" not in (tmp_path / "server.log").read_text()
