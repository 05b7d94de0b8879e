"""One load test from start to verdict: a fresh database, server instance(s), the clients for
the duration, then verification; the report as a table or one JSON object."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.loadtest.server import AppServer, free_port
from benchmarks.loadtest.target import (
    Target,
    database_drop,
    default_database_url,
    target_prepare,
    url_normalized,
)
from benchmarks.loadtest.verify import Verification, verify_all
from benchmarks.loadtest.workload import DEFAULT_MIX, REQUESTS, EndpointStats, Workload
from benchmarks.stats import percentile
from memoryproject.dbconfig import database_url_parse


@dataclass
class LoadOptions:
    duration: float = 60
    clients: int = 16
    servers: int = 1
    workers: int = 0  # per server; 0: the machine's CPU count (at least 2)
    threads: int = 8
    database_url: str = ""  # empty: default_database_url()
    port: int = 0  # first server's port; 0: free ports
    mix: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MIX))
    subjects: int = 8
    seed: int = 0
    progress: bool = True
    keep_database: bool = True
    log_dir: str = ""  # empty: a temporary directory

    def resolved_workers(self) -> int:
        return self.workers or max(2, os.cpu_count() or 2)


def endpoint_row(stats: EndpointStats) -> dict[str, Any]:
    answered = sum(stats.statuses.values())
    ok = sum(n for status, n in stats.statuses.items() if 200 <= status < 300)
    return {
        "count": answered + sum(stats.errors.values()),
        "p50_ms": round(percentile(stats.latencies_ms, 0.50), 1),
        "p99_ms": round(percentile(stats.latencies_ms, 0.99), 1),
        "non_2xx": answered - ok,
        "status_5xx": sum(n for status, n in stats.statuses.items() if status >= 500),
        "errors": sum(stats.errors.values()),
        "statuses": {str(k): v for k, v in sorted(stats.statuses.items())},
        "error_kinds": dict(stats.errors),
        "samples_5xx": list(stats.samples),
    }


@dataclass
class LoadReport:
    options: dict[str, Any]
    database: str
    elapsed_s: float
    endpoints: dict[str, dict[str, Any]]
    by_server: dict[str, int]
    verification: Verification

    @property
    def status_5xx(self) -> int:
        return sum(row["status_5xx"] for row in self.endpoints.values())

    @property
    def ok(self) -> bool:
        return self.verification.ok and self.status_5xx == 0

    def as_json(self) -> dict[str, Any]:
        total = sum(row["count"] for row in self.endpoints.values())
        return {
            "ok": self.ok,
            "options": self.options,
            "database": self.database,
            "elapsed_s": round(self.elapsed_s, 2),
            "requests": total,
            "requests_per_s": round(total / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            "status_5xx": self.status_5xx,
            "endpoints": self.endpoints,
            "by_server": self.by_server,
            "verification": self.verification.as_json(),
        }

    def render(self) -> str:
        return render_report(self)


def render_report(report: LoadReport) -> str:
    data = report.as_json()
    head = f"{'endpoint':<24}{'count':>8}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>9}{'errors':>8}"
    lines = [
        f"load test: {data['options']['clients']} clients, {data['options']['servers']} "
        f"server(s), {data['elapsed_s']} s on {data['database']}",
        head,
        "-" * len(head),
    ]
    for name, row in data["endpoints"].items():
        label = f"POST {REQUESTS[name].path}"
        lines.append(
            f"{label:<24}{row['count']:>8}{row['p50_ms']:>10}{row['p99_ms']:>10}"
            f"{row['non_2xx']:>9}{row['errors']:>8}"
        )
        lines += [f"    {sample}" for sample in row["samples_5xx"]]
    lines.append(f"{'total':<24}{data['requests']:>8}   ({data['requests_per_s']} requests/s)")
    lines += _verification_lines(report.verification)
    lines.append(f"RESULT: {'PASS' if report.ok else 'FAIL'}")
    return "\n".join(lines) + "\n"


def _verification_lines(check: Verification) -> list[str]:
    acked = ", ".join(f"{kind} {n}" for kind, n in check.acknowledged.items())
    lost = "; ".join(f"{kind}: {', '.join(ids[:5])}" for kind, ids in check.lost.items())
    log = check.injection_log
    head = (log.get("head") or {}).get("seq")
    graph = check.graph
    return [
        f"acknowledged writes: {acked}",
        f"lost writes: {check.lost_count}" + (f" ({lost})" if lost else ""),
        f"singular facts: {check.singular_pairs} subject/predicate pairs, "
        + (
            "each with exactly one active fact"
            if not check.singular_violations
            else "WRONG: " + "; ".join(check.singular_violations[:5])
        ),
        f"injection log: {'intact' if log.get('ok') else 'NOT VERIFIED'}, "
        f"{log.get('checked', 0)} records, head seq {head}, seqs "
        + ("contiguous" if check.seqs_contiguous else "NOT contiguous")
        + (f" ({log['error']})" if log.get("error") else ""),
        f"graph integrity: {'verified' if graph.get('verified') else 'NOT VERIFIED'} "
        f"({graph.get('facts')} facts, {graph.get('episodes')} episodes, "
        f"{graph.get('problems', graph.get('error'))} problems)",
    ]


def run_for(workload: Workload, seconds: float, *, progress: bool) -> None:
    """Runs the workload for ``seconds``, a progress bar on stderr when asked."""
    workload.start()
    deadline = time.monotonic() + seconds
    with tqdm(
        total=round(seconds),
        unit="s",
        file=sys.stderr,
        disable=None if progress else True,
        leave=False,
    ) as bar:
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(0.5, left))
            bar.n = min(round(seconds), round(seconds - max(left, 0)))
            bar.set_postfix(requests=workload.stats.total(), refresh=False)
            bar.refresh()
    workload.stop()


def start_servers(target: Target, options: LoadOptions, log_dir: Path) -> list[AppServer]:
    servers: list[AppServer] = []
    try:
        for index in range(options.servers):
            port = options.port + index if options.port else free_port()
            server = AppServer(
                env=target.env,
                port=port,
                log_path=log_dir / f"server-{port}.log",
                workers=options.resolved_workers(),
                threads=options.threads,
            )
            servers.append(server)
            server.launch()
        for server in servers:
            server.wait_ready()
    except BaseException:
        for server in servers:
            server.kill()
        raise
    return servers


def loadtest_run(options: LoadOptions) -> LoadReport:
    """Prepares a fresh database, serves it, loads it for ``options.duration`` and verifies."""
    url = url_normalized(options.database_url or default_database_url())
    log_dir = Path(options.log_dir or tempfile.mkdtemp(prefix="loadtest_"))
    target = target_prepare(url)
    try:
        servers = start_servers(target, options, log_dir)
        workload = Workload(
            ports=[s.port for s in servers],
            key=target.write_key,
            clients=options.clients,
            mix=options.mix,
            subjects=options.subjects,
            seed=options.seed,
        )
        try:
            run_for(workload, options.duration, progress=options.progress)
            verification = verify_all(target, servers[0].port, workload.ledger)
        finally:
            workload.stop()
            for server in servers:
                server.stop()
    finally:
        if not options.keep_database:
            database_drop(url)
    return LoadReport(
        options={
            "duration_s": options.duration,
            "clients": options.clients,
            "servers": options.servers,
            "workers_per_server": options.resolved_workers(),
            "threads_per_worker": options.threads,
            "mix": options.mix,
            "subjects": options.subjects,
        },
        database=f"{target.vendor} {Path(str(database_url_parse(url)['NAME'])).name}",
        elapsed_s=workload.elapsed,
        endpoints={name: endpoint_row(s) for name, s in sorted(workload.stats.endpoints.items())},
        by_server={str(port): n for port, n in sorted(workload.stats.by_port.items())},
        verification=verification,
    )
