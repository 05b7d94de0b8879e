"""Measures /v1/plan latency with many stored traces: through the service and through the REST
view in-process (DRF test client, API-key auth included).

By default it works in a temporary database (migrated from scratch, dropped afterwards), so
the real traces and the append-only injection log are untouched. ``--in-place`` uses the
configured database instead, under the project ``bench-plan``: its traces are deleted after the
run except the ones the plans delivered, and its injection records stay in the log (channel
"benchmark"): receipts are append-only and the evidence they point to is kept.

``--against DIR`` runs the HTTP comparison instead: our gunicorn and the CognOS gateway copied
in DIR side by side under the same load (sessions_app.peer_benchmark); when DIR is absent the
comparison is skipped with a message (exit 0).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.test.utils import override_settings
from rest_framework.test import APIClient

from audit_app.models import ReceiptSource
from memoryproject.loadtest.target import LoadTestError
from memoryproject.models import Project, Scope
from memoryproject.scratch_db import temporary_database
from memoryproject.services import api_key_create
from memoryproject.timeutil import utcnow
from memoryproject.writes import write_transaction
from sessions_app.models import Trace
from sessions_app.peer_benchmark import PeerOptions, peer_compare, peer_missing
from sessions_app.plan import plan_context

BENCH_PROJECT = "bench-plan"
TARGET_P50_MS = 5.0
INDEX_NAME = "trace_project_recent"
MODELS = ("claude-sonnet-4", "gpt-4.1", "claude-opus-4", "llama-3.3-70b")


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of the samples."""
    ordered = sorted(samples)
    index = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[index]


def summarise(samples_ms: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(samples_ms, 0.50), 3),
        "p95": round(percentile(samples_ms, 0.95), 3),
        "mean": round(sum(samples_ms) / len(samples_ms), 3),
        "max": round(max(samples_ms), 3),
    }


def traces_seed(project: Project, count: int) -> None:
    """``count`` traces over the last ten days, carrying the structured context fields."""
    now = utcnow()
    step = timedelta(days=10) / max(1, count)
    rows = []
    for i in range(count):
        rows.append(
            Trace(
                project=project,
                created_at=now - step * (count - i),
                model=MODELS[i % len(MODELS)],
                policy="benchmark",
                decision="PASS",
                trust_score=0.86 + (i % 5) * 0.01,
                risk=round(1 - (0.86 + (i % 5) * 0.01), 4),
                status_code=200,
                metadata={
                    "active_project": "memoryproject",
                    "last_decision": f"decision {i}: keep the trace index on (project, created_at)",
                    "current_output": f"step {i} of the plan benchmark",
                    "open_questions": [f"question {i % 7}?"],
                    "key_files": ["sessions_app/services.py"],
                },
            )
        )
    with write_transaction():
        Trace.objects.bulk_create(rows, batch_size=1000)


def timed(call: Callable[[], Any], iterations: int, warmup: int) -> tuple[list[float], Counter]:
    statuses: Counter = Counter()
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - start) * 1000.0)
        statuses[result] += 1
    return samples, statuses


def _traces_drop(project: Project) -> None:
    """The benchmark's traces, less those a receipt delivered (evidence is never deleted)."""
    delivered = ReceiptSource.objects.filter(trace__project=project).values("trace_id")
    Trace.objects.filter(project=project).exclude(pk__in=delivered).delete()


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
        parser.add_argument("--json", action="store_true", help="print one JSON object")
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
        peer.add_argument("--workers", type=int, default=2, help="our gunicorn workers (2)")
        peer.add_argument("--peer-workers", type=int, default=1, help="peer's workers (1)")
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
        if options["against"]:
            result = self.against(options)
        elif options["in_place"]:
            result = self.run(options, database="in-place")
        else:
            with temporary_database("plan_benchmark"):
                result = self.run(options, database="temporary")
        if options["json"]:
            self.stdout.write(json.dumps(result))
        elif "skipped" in result:
            self.stdout.write(f"plan_benchmark --against skipped: {result['skipped']}\n")
        elif "ours" in result:
            self.stdout.write(peer_table(result))
        else:
            self.stdout.write(self.table(result))

    def against(self, options: dict[str, Any]) -> dict[str, Any]:
        directory = Path(options["against"]).expanduser().resolve()
        missing = peer_missing(directory)
        if missing:
            return {"against": str(directory), "skipped": missing}
        if options["duration"] <= 0 or options["rounds"] < 1 or options["connections"] < 1:
            raise CommandError("--duration, --rounds and --connections must be positive")
        with tempfile.TemporaryDirectory(prefix="plan_benchmark_") as scratch:
            workdir = Path(options["workdir"] or scratch).resolve()
            workdir.mkdir(parents=True, exist_ok=True)
            peer_options = PeerOptions(
                against=directory,
                workdir=workdir,
                duration=options["duration"],
                warmup=options["warmup"],
                rounds=options["rounds"],
                connections=options["connections"],
                threads=options["threads"],
                traces=min(options["traces"], 2000),
                n=options["n"],
                workers=options["workers"],
                peer_workers=options["peer_workers"],
                peer_venv=Path(options["peer_venv"]).resolve() if options["peer_venv"] else None,
                load_tool=options["load"],
                progress=True,
            )
            try:
                return peer_compare(peer_options)
            except LoadTestError as exc:
                raise CommandError(str(exc)) from exc

    def run(self, options: dict[str, Any], *, database: str) -> dict[str, Any]:
        traces, iterations, n = options["traces"], options["iterations"], options["n"]
        warmup = min(20, iterations)
        connection = connections[DEFAULT_DB_ALIAS]
        project, _ = Project.objects.get_or_create(
            slug=BENCH_PROJECT, defaults={"name": "benchmark"}
        )
        _traces_drop(project)
        api_key, key = api_key_create(
            name="plan_benchmark", project_slugs=[BENCH_PROJECT], scope=Scope.READ
        )
        try:
            traces_seed(project, traces)
            plan = (
                Trace.objects.filter(project=project)
                .order_by("-created_at", "-id")
                .values_list("trace_id", "model", "trust_score", "risk", "metadata")[:n]
                .explain()
            )

            def service_call() -> str:
                body = plan_context(
                    project=project, n=n, channel="benchmark", client="plan_benchmark"
                )
                return str(body["status"])

            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

            def rest_call() -> str:
                response = client.post(
                    "/v1/plan", {"project": BENCH_PROJECT, "n": n}, format="json"
                )
                if response.status_code != 200:
                    raise CommandError(
                        f"/v1/plan answered {response.status_code}: {response.content!r}"
                    )
                return str(response.json()["status"])

            # Measured as production runs: DEBUG off, so queries are not recorded in memory.
            with override_settings(DEBUG=False):
                service_ms, service_status = timed(service_call, iterations, warmup)
                with override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"]):
                    rest_ms, rest_status = timed(rest_call, iterations, warmup)
        finally:
            _traces_drop(project)
            api_key.delete()

        service = summarise(service_ms)
        return {
            "database": connection.vendor,
            "database_mode": database,
            "traces": traces,
            "iterations": iterations,
            "n": n,
            "service_ms": service,
            "rest_ms": summarise(rest_ms),
            "statuses": dict(service_status + rest_status),
            "query_index": INDEX_NAME if INDEX_NAME in plan else None,
            "query_plan": " ".join(plan.split()),
            "target_p50_ms": TARGET_P50_MS,
            "meets_target": service["p50"] <= TARGET_P50_MS,
        }

    def table(self, result: dict[str, Any]) -> str:
        lines = [
            f"/v1/plan latency, {result['traces']} traces on {result['database']} "
            f"({result['database_mode']} database), n={result['n']}, "
            f"{result['iterations']} calls each",
            "",
            f"{'path':<22}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}{'max ms':>10}",
        ]
        for label, key in (("service", "service_ms"), ("REST (in-process)", "rest_ms")):
            row = result[key]
            lines.append(
                f"{label:<22}{row['p50']:>10.3f}{row['p95']:>10.3f}{row['mean']:>10.3f}"
                f"{row['max']:>10.3f}"
            )
        lines += [
            "",
            f"index used by the plan query: {result['query_index'] or 'NONE'}",
            f"target p50 <= {result['target_p50_ms']} ms (service): "
            + ("met" if result["meets_target"] else "NOT met"),
        ]
        return "\n".join(lines) + "\n"


def peer_table(result: dict[str, Any]) -> str:
    load = result["load"]
    lines = [
        f"/v1/plan side by side ({load['tool']}: {load['threads']} threads, "
        f"{load['connections']} connections, {load['rounds']} x {load['duration_s']:g} s per "
        f"side, alternating), {result['traces']} traces, n={result['n']}",
        "",
        f"{'server':<8}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>10}",
    ]
    for side in ("ours", "peer"):
        row = result[side]
        lines.append(
            f"{side:<8}{row['req_per_s']:>10.1f}{row['p50_ms']:>10.2f}{row['p99_ms']:>10.2f}"
            f"{row['non_2xx']:>10}"
        )
    lines += [
        "",
        f"ours: {result['ours']['server']}",
        f"peer: {result['peer']['server']}",
        f"receipts written: {result['receipts_written']} (plans answered: "
        f"{result['ours_requests_total']})",
        f"disk: a synced SQLite commit takes {result['disk_commit_ms']:.2f} ms (p50) here; "
        "the peer flushes one per request, ours (WAL) does not",
        f"ratio (req/s, median of rounds {result['ratios_per_round']}): "
        f"{result['ratio_req_per_s']:.2f}x; target >= {result['target_ratio']}x with zero "
        "non-2xx: " + ("met" if result["meets_target"] else "NOT met"),
    ]
    return "\n".join(lines) + "\n"
