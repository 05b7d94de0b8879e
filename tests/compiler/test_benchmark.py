"""memory_benchmark beside the in-memory reference, kept corpora, and the scale sweep with a cold
start in a new process (correctness and shape of the figures, not timings)."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks.memory.processes import first_compile_lines, first_compiles, snapshot_state
from benchmarks.memory.synthetic import project_drop
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear, snapshot_now
from graph_app.models import TemporalFact
from memoryproject.models import Project


def _run(*args: str) -> dict:
    out = io.StringIO()
    call_command("memory_benchmark", *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_small_run_reports_ours_as_a_ratio_to_the_reference():
    report = _run("--scale", "small")
    reference = report["reference"]
    assert reference["compile"]["n"] == report["operations"]["compile_context"]["n"] > 0
    assert reference["compile"]["p50_ms"] > 0
    assert reference["compile_p50_ratio"] > 0
    assert reference["compile_p95_ratio"] > 0
    assert reference["budget_compliance_rate"] == 1.0
    assert report["budget_compliance_rate"] == 1.0
    assert not Project.objects.filter(slug__startswith="bench-").exists()


@pytest.mark.django_db
def test_a_kept_corpus_is_loaded_again_instead_of_rebuilt():
    first = _run("--scale", "small", "--keep")
    try:
        facts = TemporalFact.objects.filter(project__slug=first["corpus"]["kept"]).count()
        second = _run("--scale", "small", "--keep")
        assert first["corpus"]["reused"] is False and first["load_ms"] is not None
        assert second["corpus"]["reused"] is True and second["load_ms"] is None
        assert second["corpus"]["kept"] == first["corpus"]["kept"]
        # At most the measured writes were added on top (the same upserts again change
        # nothing): the corpus was not loaded a second time.
        samples = 10
        after = TemporalFact.objects.filter(project__slug=first["corpus"]["kept"]).count()
        assert facts <= after <= facts + samples < 2 * first["corpus"]["facts"]
        assert second["stale_candidates"] > 0
        assert second["reference"]["compile_p50_ratio"] > 0
    finally:
        for project in Project.objects.filter(slug__startswith="bench-"):
            project_drop(project)


@pytest.mark.django_db
def test_sweep_sizes_are_refused_when_they_are_not_counts_of_facts():
    with pytest.raises(CommandError, match="--scales"):
        _run("--scales", "1k,lots")
    with pytest.raises(CommandError, match="--scales"):
        _run("--scales", "5")


# The cold start runs in a new process, which sees only committed rows.
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sweep_measures_each_size_with_a_cold_start_and_draws_the_chart(tmp_path):
    plot = tmp_path / "scaling.svg"
    result = _run("--scales", "400,200", "--plot", str(plot))
    rows = result["sweep"]
    assert [row["facts"] for row in rows] == [200, 400]
    for row in rows:
        assert row["ratio_p50"] > 0 and row["ratio_p95"] > 0
        assert row["compile_p50_ms"] > 0 and row["entity_query_p50_ms"] > 0
        assert row["cold_first_compile_ms"] > 0 and row["cold_rebuild_ms"] > 0
        assert row["worker_rss_mb"] > 0 and row["index_mb"] is not None
    for run in result["runs"]:
        cold = run["cold_start"]
        assert cold["revision"] > 0
        # built from the rows when snapshots are off, whatever the deployment would do
        assert cold["rebuilt_from_rows"]["from_snapshot"] is False
        assert cold["rebuilt_from_rows"]["rows_read"] >= run["corpus"]["facts"]
        assert run["reference"]["budget_compliance_rate"] == 1.0
    assert result["plot"] == str(plot)
    svg = ET.parse(plot).getroot()
    lines = svg.findall(".//{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 9  # seven latency series, two memory series
    assert not Project.objects.filter(slug__startswith="bench-").exists()


@pytest.mark.django_db
def test_the_stage_profile_splits_a_delivered_compile_and_counts_the_receipt_inserts():
    with pytest.raises(CommandError, match="--keep"):
        _run("--scale", "small", "--profile-stages")
    # (the receipts stay with the kept corpus; the test's transaction rolls both back)
    profile = _run("--scale", "small", "--keep", "--profile-stages")["stage_profile"]
    assert profile["compiles"] > 0 and profile["total_p50_ms"] > 0
    stages = profile["stages"]
    assert set(stages) == {
        "ranking",
        "activation",
        "packing",
        "sql_reads",
        "receipt_write",
        "other",
    }
    assert stages["ranking"]["mean_ms"] > 0 and stages["packing"]["mean_ms"] > 0
    assert stages["receipt_write"]["mean_ms"] > 0
    assert sum(s["mean_ms"] for s in stages.values()) == pytest.approx(
        profile["total_mean_ms"], abs=0.01
    )
    assert profile["receipt_inserts_per_delivery"] >= 1
    # the readable table carries the same figures
    out = io.StringIO()
    call_command("memory_benchmark", "--scale", "small", "--keep", "--profile-stages", stdout=out)
    table = out.getvalue()
    assert "delivered compile, per stage" in table
    for stage in stages:
        assert f"  {stage} " in table
    assert "receipt inserts per delivery:" in table


@pytest.mark.django_db
def test_the_first_compile_figures_name_the_writes_each_new_server_replays(
    settings, tmp_path, default_project
):
    """``--first-compile`` states the snapshot a new server starts from: how many writes it
    replays before its first compile, or that it builds the index from the rows."""
    settings.COMPILER_SNAPSHOT_DIR = str(tmp_path / "index")
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 10_000

    def write(value: str) -> None:
        fact_upsert(
            project=default_project,
            subject_id="payment_service",
            predicate="depends_on",
            object_value=value,
        )

    write("ledger_store")
    assert snapshot_state("default")["snapshot_revision"] is None
    assert snapshot_now(default_project)["status"] == "written"
    write("auth_service")
    write("billing_api")
    compiler_cache_clear()
    state = snapshot_state("default")
    assert state["writes_behind"] == 2
    assert state["graph_revision"] == state["snapshot_revision"] + 2
    [head] = first_compile_lines({"loadavg": "0.1 0.1 0.1", "snapshot": state, "runs": {}})[:1]
    assert f"snapshot at revision {state['snapshot_revision']}" in head
    assert "each server replays 2 writes" in head


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_new_servers_first_compile_is_timed_through_each_door_with_each_processs_cpu(
    default_project,
):
    """``--first-compile`` starts a real ``mcp_serve`` and a real REST API server on this
    database and times each to its first compile, with the CPU and memory of every process
    (the MCP server's front and back, the web server's main process and its workers)."""
    fact_upsert(
        project=default_project,
        subject_id="payment_service",
        predicate="depends_on",
        object_value="ledger_store",
    )
    result = first_compiles("default", "what does payment_service depend on", soak=6)
    roles = {"mcp_stdio": ["front", "back"], "web": ["main", "worker", "worker"]}
    for door, expected in roles.items():
        [run] = result["runs"][door]
        processes = run["processes"]
        assert [p["role"] for p in processes] == expected
        # Then the varied compiles, every one answered, and each process's memory again.
        assert run["soaked"]["compiles"] == 6
        assert [p["role"] for p in run["soaked"]["processes"]] == expected
        assert all(p["rss_mb"] > 0 for p in run["soaked"]["processes"])
        assert run["first_compile_ms"] > 0 and run["second_compile_ms"] > 0
        # The total is the processes' own figures added up; the process that loaded the
        # application (the back, the main process) did work before the first answer.
        assert sum(p["first_cpu_ms"] for p in processes) == pytest.approx(
            run["first_cpu_ms"], abs=0.5
        )
        assert processes[1 if door == "mcp_stdio" else 0]["first_cpu_ms"] > 0
        assert all(p["rss_mb"] > 0 for p in processes)
    table = "\n".join(first_compile_lines(result))
    assert "CPU at the first answer" in table
    assert re.search(r"^web .* main [\d.]+/[\d.]+ \d+, worker", table, re.MULTILINE)
    assert re.search(r"after 6 varied compiles: main [\d.]+/[\d.]+, worker", table)
