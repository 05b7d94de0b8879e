"""Latency and correctness figures of the knowledge graph and the context compiler, beside a
plain in-memory reference over the same corpus (``graph_app/benchmark/``).

Generates a synthetic engineering memory with a fixed seed into a project of the configured
database, measures the operations (writes through the real services on a sample on top of it),
compiles every query with ours and with the reference in turn, then deletes the project unless
``--keep`` (a kept corpus is found again by the next run with ``--keep``: 100,000 facts take
minutes to load). ``--scales`` sweeps several sizes, each with a cold start in a new process,
and writes a log-log chart.

    manage.py memory_benchmark --scale small|cortex|100k [--json] [--seed N] [--keep] [--cold]
    manage.py memory_benchmark --scales 1k,10k,100k [--plot FILE] [--keep] [--json]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from graph_app.benchmark.coldstart import cold_start_run
from graph_app.benchmark.run import run_benchmark
from graph_app.benchmark.sweep import sweep_run, sweep_table
from graph_app.benchmark.synthetic import SCALES, scale_parse
from graph_app.benchmark.synthetic import project_drop as _project_drop

__all__ = ["Command", "_project_drop"]
SWEEP_DEFAULT = "1k,10k,100k"


def _sizes(text: str) -> list[int]:
    try:
        return [scale_parse(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise CommandError(f"--scales: {error}") from error


class Command(BaseCommand):
    help = "Benchmarks graph writes/reads and context compilation on a synthetic memory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--scale", choices=sorted(SCALES), default="cortex")
        parser.add_argument(
            "--scales",
            help="sweep these sizes in facts, e.g. 1k,10k,100k (each with a cold start)",
        )
        parser.add_argument(
            "--sweep", action="store_true", help=f"sweep the default sizes ({SWEEP_DEFAULT})"
        )
        parser.add_argument(
            "--plot",
            type=Path,
            default=None,
            help="where the sweep's log-log chart (SVG) goes (default data/benchmark/...)",
        )
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--keep", action="store_true", help="keep the corpus for the next run, or reuse it"
        )
        parser.add_argument(
            "--cold", action="store_true", help="also time a first compile in a new process"
        )
        parser.add_argument("--cold-start", metavar="PROJECT", help="(internal) the new process")
        parser.add_argument("--query", default="what does it depend on")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["cold_start"]:
            self.stdout.write(json.dumps(cold_start_run(options["cold_start"], options["query"])))
            return
        if options["scales"] or options["sweep"]:
            self._sweep(options)
            return
        scale, seed = options["scale"], options["seed"]
        result = run_benchmark(scale, seed=seed, keep=options["keep"], cold_start=options["cold"])
        if scale == "100k":
            reference = run_benchmark("cortex", seed=seed)
            ref_p50 = reference["operations"]["compile_context"]["p50_ms"]
            p50 = result["operations"]["compile_context"]["p50_ms"]
            corpus = lambda r: r["corpus"]["facts"] + r["corpus"]["episodes"]  # noqa: E731
            result["versus_cortex"] = {
                "cortex_compile_p50_ms": ref_p50,
                "compile_p50_ratio": round(p50 / ref_p50, 2) if ref_p50 else None,
                "corpus_ratio": round(corpus(result) / corpus(reference), 1),
            }
        self._print(result, options)

    def _sweep(self, options: dict[str, Any]) -> None:
        sizes = _sizes(options["scales"] or SWEEP_DEFAULT)
        seed = options["seed"]
        plot = options["plot"] or Path(settings.BASE_DIR) / "data" / "benchmark" / (
            f"memory_scaling_s{seed}.svg"
        )
        result = sweep_run(sizes, seed=seed, plot=plot, keep=options["keep"])
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        out = self.stdout.write
        out(f"memory_benchmark sweep, seed {seed}: ours vs the in-memory reference (x = ours/ref)")
        for line in sweep_table(result["sweep"]):
            out(line)
        out("cmp/ref: compile at 800 tokens; eq: entity query at 2 hops. In a new process:")
        out("build: first compile building the index from the rows, idx: its RSS growth; cold:")
        out("first compile as deployed (snap: from the index snapshot), RSS: the process after.")
        if result["failed"]:
            failed = result["failed"]
            out(f"{failed['facts']} facts did not run to the end: {failed['error']}")
        out(f"chart: {result['plot']}")

    def _print(self, result: dict[str, Any], options: dict[str, Any]) -> None:
        scale, seed = result["scale"], result["seed"]
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        out = self.stdout.write
        c = result["corpus"]
        out(
            f"memory_benchmark --scale {scale} --seed {seed}: {c['entities']} entities, "
            f"{c['facts']} facts ({c['superseded']} superseded), {c['episodes']} episodes, "
            f"{c['compile_queries']} compile queries at {c['budget_tokens']} tokens"
        )
        out(f"{'operation':<20}{'n':>6}{'p50 ms':>10}{'p95 ms':>10}")
        out("-" * 46)
        for name, s in result["operations"].items():
            out(f"{name:<20}{s['n']:>6}{s['p50_ms']:>10.3f}{s['p95_ms']:>10.3f}")
        out("-" * 46)
        out(
            f"stale-fact suppression rate   {result['stale_suppression_rate']:.1%} ({result['stale_candidates']} stale candidates)"
        )
        out(f"budget compliance rate        {result['budget_compliance_rate']:.1%}")
        out(f"integrity verified            {result['integrity_verified']}")
        load = "reused" if result["load_ms"] is None else f"{result['load_ms']:.0f}"
        out(
            f"bulk load / index build / refresh after writes: {load} / "
            f"{result['index_build_ms']:.0f} / {result['index_refresh_after_writes_ms']:.0f} ms"
        )
        r = result["reference"]
        out(
            f"in-memory reference compile p50/p95: {r['compile']['p50_ms']:.3f} / "
            f"{r['compile']['p95_ms']:.3f} ms; ours is {r['compile_p50_ratio']}x / "
            f"{r['compile_p95_ratio']}x of it (build {r['build_ms']:.0f} ms)"
        )
        if "cold_start" in result:
            cold = result["cold_start"]
            rebuilt = cold["rebuilt_from_rows"]
            source = "from the snapshot" if cold["from_snapshot"] else "built from the rows"
            out(
                f"new process: first compile {rebuilt['first_compile_ms']:.0f} ms building the "
                f"index (index {rebuilt['index_mb']} MiB); as deployed "
                f"{cold['first_compile_ms']:.0f} ms ({source}), RSS {cold['rss_after_mb']} MiB"
            )
        if "versus_cortex" in result:
            v = result["versus_cortex"]
            out(
                f"compile p50 vs cortex: {v['compile_p50_ratio']}x for a {v['corpus_ratio']}x "
                f"larger corpus (cortex p50 {v['cortex_compile_p50_ms']} ms)"
            )
