"""Measures /v1/plan latency with many stored traces: through the service and through the REST
view in-process (DRF test client, API-key auth included; ``benchmarks/plan/latency.py``).

By default it works in a temporary database (migrated from scratch, dropped afterwards), so
the real traces and the append-only injection log are untouched. ``--in-place`` uses the
configured database instead, under the project ``bench-plan``: its traces are deleted after the
run except the ones the plans delivered, and its injection records stay in the log (channel
"benchmark"): receipts are append-only and the evidence they point to is kept.

``--against DIR`` runs the HTTP comparison instead: our server and the CognOS gateway copied
in DIR side by side under the same load (``benchmarks/plan/peer.py``); when DIR is absent the
comparison is skipped with a message (exit 0). ``--under-load N`` measures either beside N more
processes each spinning one core (``benchmarks/under_load.py``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.loadtest.target import LoadTestError
from benchmarks.plan.latency import BENCH_PROJECT, latency_table, plan_benchmark
from benchmarks.plan.peer import peer_compare_in, peer_missing, peer_table
from benchmarks.under_load import (
    spinning,
    under_load_add,
    under_load_line,
    under_load_note,
    under_load_option,
)
from memoryproject.command_output import json_flag_add

#: The options of a run against the peer that go to it as they were given.
_PEER = ("duration", "warmup", "rounds", "connections", "threads", "n", "workers", "peer_workers")


class Command(BaseCommand):
    help = "Measure in-process /v1/plan latency (p50/p95) with many stored traces."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--traces",
            type=int,
            default=10000,
            help="traces to store (10000; with --against at most 2000, sent to both over HTTP)",
        )
        parser.add_argument("--iterations", type=int, default=200, help="timed calls (200)")
        parser.add_argument("--n", type=int, default=5, help="traces per plan (5)")
        json_flag_add(parser)
        under_load_add(parser)
        parser.add_argument(
            "--in-place",
            action="store_true",
            help=f"use the configured database (project '{BENCH_PROJECT}') instead of a "
            "temporary one",
        )
        peer = parser.add_argument_group("side by side with the CognOS gateway (--against)")
        peer.add_argument(
            "--against",
            metavar="DIR",
            help="the CognOS gateway's copy (e.g. ../shared/peers/cognos-gateway): run /v1/plan "
            "over HTTP against ours and it, alternating rounds; skipped when DIR is absent",
        )
        peer.add_argument("--duration", type=float, default=10.0, help="seconds per run (10)")
        peer.add_argument("--rounds", type=int, default=3, help="runs per side (3)")
        peer.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds (2)")
        peer.add_argument("--connections", type=int, default=8, help="open connections (8)")
        peer.add_argument("--threads", type=int, default=2, help="load threads (wrk -t, 2)")
        peer.add_argument("--workers", type=int, default=2, help="our server's workers (2)")
        peer.add_argument(
            "--peer-workers",
            type=int,
            default=None,
            help="the peer's uvicorn workers (as many as --workers)",
        )
        peer.add_argument(
            "--peer-venv", help="the peer's virtualenv (made if absent; data/peers/cognos-venv)"
        )
        peer.add_argument(
            "--load", choices=("auto", "wrk", "python"), default="auto", help="load generator"
        )
        peer.add_argument("--workdir", help="servers' databases and logs (a temporary directory)")

    def handle(self, *args: Any, **options: Any) -> None:
        # WhiteNoise warns once per request handler when collectstatic has not run; noise here.
        warnings.filterwarnings("ignore", "No directory at", UserWarning)
        if options["traces"] < 1 or options["iterations"] < 1:
            raise CommandError("--traces and --iterations must be at least 1")
        if not 1 <= options["n"] <= 50:
            raise CommandError("--n must be from 1 to 50")
        busy = under_load_option(options)
        with spinning(busy):
            if options["against"]:
                result = self.against(options)
            else:
                result = plan_benchmark(
                    traces=options["traces"],
                    iterations=options["iterations"],
                    n=options["n"],
                    in_place=options["in_place"],
                )
        under_load_note(result, busy)
        if options["json"]:
            self.stdout.write(json.dumps(result))
        elif "skipped" in result:
            self.stdout.write(f"plan_benchmark --against skipped: {result['skipped']}\n")
        elif "ours" in result:
            self.stdout.write(peer_table(result))
            self.stdout.write(under_load_line(result) + "\n")
        else:
            self.stdout.write(latency_table(result))
            self.stdout.write(under_load_line(result) + "\n")

    def against(self, options: dict[str, Any]) -> dict[str, Any]:
        directory = Path(options["against"]).expanduser().resolve()
        missing = peer_missing(directory)
        if missing:
            return {"against": str(directory), "skipped": missing}
        if options["duration"] <= 0 or options["rounds"] < 1 or options["connections"] < 1:
            raise CommandError("--duration, --rounds and --connections must be positive")
        try:
            return peer_compare_in(
                options["workdir"],
                against=directory,
                traces=min(options["traces"], 2000),
                peer_venv=Path(options["peer_venv"]).resolve() if options["peer_venv"] else None,
                load_tool=options["load"],
                progress=True,
                **{name: options[name] for name in _PEER},
            )
        except LoadTestError as exc:
            raise CommandError(str(exc)) from exc
