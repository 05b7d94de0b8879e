"""/v1/plan latency with many stored traces (``manage.py plan_benchmark``): through the service
and through the REST view in-process (DRF test client, API-key auth included).

By default it works in a temporary database (migrated from scratch, dropped afterwards), so
the real traces and the append-only injection log are untouched. In place, it uses the
configured database under the project ``bench-plan``: its traces are deleted after the run
except the ones the plans delivered, and its injection records stay in the log (channel
"benchmark"): receipts are append-only and the evidence they point to is kept.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.test.utils import override_settings
from rest_framework.test import APIClient

from audit_app.models import ReceiptSource
from benchmarks.stats import percentile
from memoryproject.models import Project, Scope
from memoryproject.scratch_db import temporary_database
from memoryproject.services import api_key_create
from memoryproject.timeutil import utcnow
from memoryproject.writes import write_transaction
from sessions_app.models import Trace
from sessions_app.plan import plan_context

BENCH_PROJECT = "bench-plan"
TARGET_P50_MS = 5.0
INDEX_NAME = "trace_project_recent"
MODELS = ("claude-sonnet-4", "gpt-4.1", "claude-opus-4", "llama-3.3-70b")


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


def plan_latency(*, traces: int, iterations: int, n: int, database: str) -> dict[str, Any]:
    """Stores ``traces`` traces under the benchmark's project, then times ``iterations`` plans
    of ``n`` traces through the service and through the REST view; the traces are deleted
    afterwards except the ones the plans delivered."""
    warmup = min(20, iterations)
    connection = connections[DEFAULT_DB_ALIAS]
    project, _ = Project.objects.get_or_create(slug=BENCH_PROJECT, defaults={"name": "benchmark"})
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
            body = plan_context(project=project, n=n, channel="benchmark", client="plan_benchmark")
            return str(body["status"])

        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

        def rest_call() -> str:
            response = client.post("/v1/plan", {"project": BENCH_PROJECT, "n": n}, format="json")
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


def plan_benchmark(*, traces: int, iterations: int, n: int, in_place: bool) -> dict[str, Any]:
    """``plan_latency`` in the configured database, or in a temporary one."""
    if in_place:
        return plan_latency(traces=traces, iterations=iterations, n=n, database="in-place")
    with temporary_database("plan_benchmark"):
        return plan_latency(traces=traces, iterations=iterations, n=n, database="temporary")


def latency_table(result: dict[str, Any]) -> str:
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
