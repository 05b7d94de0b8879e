"""What ``manage.py memory_benchmark`` runs and prints: one scale (the 100k scale beside the
cortex one), or a sweep of sizes with its chart, as a report and as lines of text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks.memory.run import run_benchmark
from benchmarks.memory.stages import stage_lines
from benchmarks.memory.sweep import sweep_run, sweep_table

SWEEP_DEFAULT = "1k,10k,100k"


def _corpus_size(report: dict[str, Any]) -> int:
    return report["corpus"]["facts"] + report["corpus"]["episodes"]


def memory_benchmark(
    scale: str, *, seed: int, keep: bool, cold_start: bool, stages: bool = False
) -> dict[str, Any]:
    """The benchmark at ``scale``; the 100k scale also reports its compile p50 as a ratio to
    the cortex scale's (``versus_cortex``); ``stages``: also the time per compile stage."""
    result = run_benchmark(scale, seed=seed, keep=keep, cold_start=cold_start, stages=stages)
    if scale == "100k":
        reference = run_benchmark("cortex", seed=seed)
        ref_p50 = reference["operations"]["compile_context"]["p50_ms"]
        p50 = result["operations"]["compile_context"]["p50_ms"]
        result["versus_cortex"] = {
            "cortex_compile_p50_ms": ref_p50,
            "compile_p50_ratio": round(p50 / ref_p50, 2) if ref_p50 else None,
            "corpus_ratio": round(_corpus_size(result) / _corpus_size(reference), 1),
        }
    return result


def sweep_plot_default(seed: int) -> Path:
    """Where the sweep's chart goes when no path is given."""
    return Path(settings.BASE_DIR) / "data" / "benchmark" / f"memory_scaling_s{seed}.svg"


def memory_sweep(sizes: list[int], *, seed: int, plot: Path | None, keep: bool) -> dict[str, Any]:
    return sweep_run(sizes, seed=seed, plot=plot or sweep_plot_default(seed), keep=keep)


def sweep_lines(result: dict[str, Any]) -> list[str]:
    lines = [
        f"memory_benchmark sweep, seed {result['seed']}: ours vs the in-memory reference "
        "(x = ours/ref)",
        *sweep_table(result["sweep"]),
        "cmp/ref: compile at 800 tokens; eq: entity query at 2 hops. In a new process:",
        "build: first compile building the index from the rows, idx: its RSS growth; cold:",
        "first compile as deployed (snap: from the index snapshot), RSS: the process after.",
    ]
    if result["failed"]:
        failed = result["failed"]
        lines.append(f"{failed['facts']} facts did not run to the end: {failed['error']}")
    lines.append(f"chart: {result['plot']}")
    return lines


def _cold_start_line(cold: dict[str, Any]) -> str:
    rebuilt = cold["rebuilt_from_rows"]
    source = "from the snapshot" if cold["from_snapshot"] else "built from the rows"
    return (
        f"new process: first compile {rebuilt['first_compile_ms']:.0f} ms building the "
        f"index (index {rebuilt['index_mb']} MiB); as deployed "
        f"{cold['first_compile_ms']:.0f} ms ({source}), RSS {cold['rss_after_mb']} MiB"
    )


def report_lines(result: dict[str, Any]) -> list[str]:
    c = result["corpus"]
    lines = [
        f"memory_benchmark --scale {result['scale']} --seed {result['seed']}: "
        f"{c['entities']} entities, {c['facts']} facts ({c['superseded']} superseded), "
        f"{c['episodes']} episodes, {c['compile_queries']} compile queries at "
        f"{c['budget_tokens']} tokens",
        f"{'operation':<20}{'n':>6}{'p50 ms':>10}{'p95 ms':>10}",
        "-" * 46,
    ]
    for name, s in result["operations"].items():
        lines.append(f"{name:<20}{s['n']:>6}{s['p50_ms']:>10.3f}{s['p95_ms']:>10.3f}")
    load = "reused" if result["load_ms"] is None else f"{result['load_ms']:.0f}"
    r = result["reference"]
    lines += [
        "-" * 46,
        f"stale-fact suppression rate   {result['stale_suppression_rate']:.1%} "
        f"({result['stale_candidates']} stale candidates)",
        f"budget compliance rate        {result['budget_compliance_rate']:.1%}",
        f"integrity verified            {result['integrity_verified']}",
        f"bulk load / index build / refresh after writes: {load} / "
        f"{result['index_build_ms']:.0f} / {result['index_refresh_after_writes_ms']:.0f} ms",
        f"in-memory reference compile p50/p95: {r['compile']['p50_ms']:.3f} / "
        f"{r['compile']['p95_ms']:.3f} ms; ours is {r['compile_p50_ratio']}x / "
        f"{r['compile_p95_ratio']}x of it (build {r['build_ms']:.0f} ms)",
    ]
    if "cold_start" in result:
        lines.append(_cold_start_line(result["cold_start"]))
    if "versus_cortex" in result:
        v = result["versus_cortex"]
        lines.append(
            f"compile p50 vs cortex: {v['compile_p50_ratio']}x for a {v['corpus_ratio']}x "
            f"larger corpus (cortex p50 {v['cortex_compile_p50_ms']} ms)"
        )
    if "stage_profile" in result:
        lines += stage_lines(result["stage_profile"])
    return lines
