"""/v1/plan side by side with the CognOS gateway: both servers on this machine, seeded with the
same traces, the same load run against each in alternating rounds; req/s, p50/p99 latency and
non-2xx answers for each, and our throughput as a ratio to the peer's.

Ours runs as deployed: ``python -m memoryproject.server`` (granian, 2 workers) on a SQLite file,
API-key authentication on, a chained receipt appended to the injection log by every plan. The
peer runs as its README says: uvicorn in its own virtual environment, traces in SQLite, with as
many worker processes as ours unless ``peer_workers`` says otherwise, so that neither side has
more processes to spread over the cores. The load
is wrk when installed (POST with a body through a Lua script), else a Python generator of
keep-alive connections. Setting up goes through ``manage.py`` and HTTP, never this process's
database.
"""

from __future__ import annotations

import http.client
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.loadtest.server import AppServer, free_port
from benchmarks.loadtest.target import REPO, LoadTestError, target_prepare
from benchmarks.memory.coldstart import memory_of
from benchmarks.memory.processes import children_of
from benchmarks.stats import percentile

PROJECT = "bench-plan"
TARGET_RATIO = 1.5
PEER_PACKAGES = ("fastapi>=0.104", "uvicorn[standard]>=0.24", "pydantic>=2")
MODELS = ("claude-sonnet-4", "gpt-4.1", "claude-opus-4", "llama-3.3-70b")
WRK_MARK = "PLANBENCH "


@dataclass
class PeerOptions:
    against: Path
    workdir: Path
    duration: float = 10.0
    warmup: float = 2.0
    rounds: int = 3
    connections: int = 8
    threads: int = 2
    traces: int = 200
    n: int = 5
    workers: int = 2
    peer_workers: int | None = None  # None: as many as ours (the same processes on each side)
    peer_venv: Path | None = None
    load_tool: str = "auto"  # auto | wrk | python
    progress: bool = False  # steps and a progress bar on stderr

    def note(self, message: str) -> None:
        if self.progress:
            tqdm.write(message, file=sys.stderr)


def peer_missing(directory: Path) -> str:
    """Why ``directory`` is not a CognOS gateway copy ('' when it is one)."""
    if not directory.is_dir():
        return f"{directory} does not exist"
    if not (directory / "src" / "main.py").is_file():
        return f"{directory} holds no src/main.py (not a CognOS gateway copy)"
    return ""


def load_tool(choice: str) -> str:
    """wrk when asked or (auto) installed, else the Python generator."""
    if choice == "wrk" and shutil.which("wrk") is None:
        raise LoadTestError("--load wrk: wrk is not installed (apt-get install -y wrk)")
    if choice == "auto":
        return "wrk" if shutil.which("wrk") else "python"
    return choice


# ---- servers --------------------------------------------------------------------------------


class OurServer(AppServer):
    """The REST API's server with the deployment's settings (one Python thread a worker)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(threads=1, **kwargs)


class PeerServer:
    """The CognOS gateway under uvicorn, in its own process group."""

    def __init__(self, *, python: Path, source: Path, db_path: Path, port: int, workers: int):
        self.python, self.source, self.db_path = python, source, db_path
        self.port, self.workers = port, workers
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = db_path.parent / "peer.log"

    def start(self, timeout: float = 60) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        command = [str(self.python), "-m", "uvicorn", "--app-dir", str(self.source), "main:app"]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        if self.workers > 1:
            command += ["--workers", str(self.workers)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.db_path.parent,
                env={"PATH": "/usr/bin:/bin", "COGNOS_TRACE_DB": str(self.db_path)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not _answers(self.port, "/health"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise LoadTestError(f"the CognOS gateway did not start:\n{tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _answers(port: int, path: str) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def peer_python(options: PeerOptions) -> Path:
    """The peer's interpreter: its virtual environment, made (as its README says) if absent."""
    venv = options.peer_venv or REPO / "data" / "peers" / "cognos-venv"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    options.note(f"making the CognOS gateway's virtual environment in {venv}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = [str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES]
    if subprocess.run(install, check=False).returncode != 0:
        raise LoadTestError(f"could not install {', '.join(PEER_PACKAGES)} into {venv}")
    return python


# ---- the same traces on both sides ----------------------------------------------------------


def trace_rows(count: int) -> list[dict[str, Any]]:
    """``count`` traces over the last hour, oldest first, with the structured context fields."""
    now = datetime.now(UTC)
    rows = []
    for i in range(count):
        trust = 0.86 + (i % 5) * 0.01
        rows.append(
            {
                "trace_id": str(uuid.uuid4()),
                "created_at": (now - timedelta(seconds=10 * (count - i))).isoformat(),
                "model": MODELS[i % len(MODELS)],
                "policy": "benchmark",
                "trust_score": round(trust, 4),
                "risk": round(1 - trust, 4),
                "status_code": 200,
                "metadata": {
                    "active_project": "memoryproject",
                    "last_decision": f"decision {i}: keep the trace index on (project, created_at)",
                    "current_output": f"step {i} of the plan benchmark",
                    "open_questions": [f"question {i % 7}?"],
                    "key_files": ["sessions_app/services.py"],
                },
            }
        )
    return rows


def ours_seed(port: int, key: str, rows: list[dict[str, Any]]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    try:
        for row in rows:
            body = json.dumps({"project": PROJECT, **row, "decision": "PASS"})
            connection.request("POST", "/v1/traces", body=body, headers=headers)
            response = connection.getresponse()
            text = response.read()
            if response.status != 201:
                raise LoadTestError(f"POST /v1/traces answered {response.status}: {text[:300]!r}")
    finally:
        connection.close()


def peer_seed(db_path: Path, rows: list[dict[str, Any]]) -> None:
    with sqlite3.connect(db_path) as connection:
        connection.executemany(
            "INSERT INTO traces (trace_id, created_at, decision, policy, trust_score, risk, "
            "is_stream, status_code, model, metadata) VALUES (:trace_id, :created_at, 'PASS', "
            ":policy, :trust_score, :risk, 0, :status_code, :model, :metadata)",
            [{**row, "metadata": json.dumps(row["metadata"])} for row in rows],
        )


def disk_commit_ms(directory: Path, commits: int = 20) -> float:
    """p50 of a SQLite commit in rollback-journal mode with full sync (the peer's settings) in
    ``directory``: the disk's flush latency, which bounds a server that flushes per request."""
    path = directory / "disk_probe.sqlite3"
    samples = []
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
        connection.commit()
        for n in range(commits):
            start = time.perf_counter()
            connection.execute("INSERT INTO probe VALUES (?)", (n,))
            connection.commit()
            samples.append((time.perf_counter() - start) * 1000)
    path.unlink(missing_ok=True)
    return round(statistics.median(samples), 3)


def receipts_count(db_path: Path) -> int:
    """Plan receipts in our injection log."""
    with sqlite3.connect(db_path) as connection:
        row = connection.execute(
            "SELECT COUNT(*) FROM audit_app_injectionrecord WHERE source = 'plan'"
        ).fetchone()
    return int(row[0])


# ---- load -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """One side's /v1/plan: where it listens and what each request carries."""

    name: str
    port: int
    body: str
    headers: dict[str, str]


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = %(body)s
%(headers)s
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "%(mark)s{\\"requests\\":%%d,\\"duration_us\\":%%d,\\"non_2xx\\":%%d,\\"socket_errors\\":%%d,"
    .. "\\"p50_us\\":%%d,\\"p99_us\\":%%d,\\"mean_us\\":%%.1f}\\n",
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.mean))
end
"""


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal here


def wrk_run(endpoint: Endpoint, options: PeerOptions, duration: float) -> dict[str, Any]:
    headers = "\n".join(
        f"wrk.headers[{_lua_string(k)}] = {_lua_string(v)}" for k, v in endpoint.headers.items()
    )
    script = options.workdir / f"{endpoint.name}.lua"
    script.write_text(
        WRK_SCRIPT % {"body": _lua_string(endpoint.body), "headers": headers, "mark": WRK_MARK}
    )
    command = ["wrk", f"-t{options.threads}", f"-c{options.connections}"]
    command += [f"-d{max(1, round(duration))}s", "--timeout", "10s", "-s", str(script)]
    command.append(f"http://127.0.0.1:{endpoint.port}/v1/plan")
    output = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    for line in output.splitlines():
        if line.startswith(WRK_MARK):
            raw = json.loads(line[len(WRK_MARK) :])
            seconds = raw["duration_us"] / 1e6
            return {
                "requests": raw["requests"],
                "req_per_s": round(raw["requests"] / seconds, 1),
                "p50_ms": round(raw["p50_us"] / 1000, 3),
                "p99_ms": round(raw["p99_us"] / 1000, 3),
                "non_2xx": raw["non_2xx"] + raw["socket_errors"],
            }
    raise LoadTestError(f"wrk printed no summary:\n{output[-2000:]}")


def python_run(endpoint: Endpoint, options: PeerOptions, duration: float) -> dict[str, Any]:
    """``connections`` keep-alive connections, each in a thread, for ``duration`` seconds."""
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + duration

    def client() -> None:
        mine: list[float] = []
        failed = 0
        connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                connection.request("POST", "/v1/plan", body=endpoint.body, headers=endpoint.headers)
                response = connection.getresponse()
                response.read()
                failed += not 200 <= response.status < 300
            except (OSError, http.client.HTTPException):
                failed += 1
                connection.close()
            mine.append((time.perf_counter() - start) * 1000)
        connection.close()
        with lock:
            latencies.extend(mine)
            failures[0] += failed

    started = time.perf_counter()
    workers = [threading.Thread(target=client) for _ in range(options.connections)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "req_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50), 3),
        "p99_ms": round(percentile(latencies, 0.99), 3),
        "non_2xx": failures[0],
    }


def load_run(endpoint: Endpoint, options: PeerOptions, tool: str, duration: float) -> dict:
    runner = wrk_run if tool == "wrk" else python_run
    return runner(endpoint, options, duration)


def side_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds; requests and non-2xx summed."""
    return {
        "req_per_s": round(statistics.median(r["req_per_s"] for r in runs), 1),
        "p50_ms": round(statistics.median(r["p50_ms"] for r in runs), 3),
        "p99_ms": round(statistics.median(r["p99_ms"] for r in runs), 3),
        "requests": sum(r["requests"] for r in runs),
        "non_2xx": sum(r["non_2xx"] for r in runs),
        "runs": runs,
    }


# ---- one comparison -------------------------------------------------------------------------


def _rounds(
    endpoints: tuple[Endpoint, Endpoint],
    options: PeerOptions,
    tool: str,
    warmed: Callable[[], None] = lambda: None,
) -> dict[str, list[dict[str, Any]]]:
    """A warm-up per side (``warmed`` runs after them), then the rounds, the side that goes
    first alternating."""
    total = len(endpoints) * (options.warmup + options.rounds * options.duration)
    if options.warmup <= 0:
        raise LoadTestError("--warmup must be positive")
    bar = tqdm(total=round(total), unit="s", file=sys.stderr, disable=not options.progress)
    with bar:
        runs: dict[str, list[dict[str, Any]]] = {e.name: [] for e in endpoints}
        for endpoint in endpoints:
            bar.set_description(f"warm-up {endpoint.name}")
            runs[f"{endpoint.name}_warmup"] = [load_run(endpoint, options, tool, options.warmup)]
            bar.update(round(options.warmup))
        warmed()
        for index in range(options.rounds):
            order = endpoints if index % 2 == 0 else endpoints[::-1]
            for endpoint in order:
                bar.set_description(f"round {index + 1}/{options.rounds} {endpoint.name}")
                runs[endpoint.name].append(load_run(endpoint, options, tool, options.duration))
                bar.update(round(options.duration))
    return runs


def peer_compare(options: PeerOptions) -> dict[str, Any]:
    """Starts both servers, seeds them, runs the rounds and answers the report."""
    peer_workers = options.workers if options.peer_workers is None else options.peer_workers
    tool = load_tool(options.load_tool)
    python = peer_python(options)
    rows = trace_rows(options.traces)
    ours_db = options.workdir / "memory_load_plan.sqlite3"
    options.note("preparing our database (migrate, API key)")
    target = target_prepare(f"sqlite:///{ours_db}", project=PROJECT)
    ours = OurServer(
        env=target.env,
        port=free_port(),
        log_path=options.workdir / "server.log",
        workers=options.workers,
    )
    peer = PeerServer(
        python=python,
        source=options.against / "src",
        db_path=options.workdir / "peer" / "traces.sqlite3",
        port=free_port(),
        workers=peer_workers,
    )
    try:
        ours.start()
        peer.start()
        ours_seed(ours.port, target.write_key, rows)
        peer_seed(peer.db_path, rows)
        body = {"n": options.n, "trust_threshold": 0.75, "mode": "auto"}
        json_type = {"Content-Type": "application/json"}
        endpoints = (
            Endpoint(
                "ours",
                ours.port,
                json.dumps({"project": PROJECT, **body}),
                {**json_type, "Authorization": f"Bearer {target.write_key}"},
            ),
            Endpoint("peer", peer.port, json.dumps(body), json_type),
        )
        disk_ms = disk_commit_ms(options.workdir)
        memory: dict[str, list[dict[str, float]]] = {}
        runs = _rounds(
            endpoints,
            options,
            tool,
            warmed=lambda: memory.update(after_warmup=workers_memory(ours)),
        )
        memory["at_end"] = workers_memory(ours)
    finally:
        ours.stop()
        peer.stop()
    report = _report(options, tool, runs, receipts_count(ours_db), peer_workers)
    report["disk_commit_ms"] = disk_ms
    report["ours_workers_memory"] = memory
    return report


def workers_memory(server: AppServer) -> list[dict[str, float]]:
    """RSS and PSS (MiB) of each of ``server``'s workers: read after the warm-up and
    at the end of the rounds, they show whether a worker grows with the plans it answers."""
    assert server.process is not None
    return [memory_of(pid) for pid in children_of(server.process.pid)]


def peer_compare_in(workdir: str | None, **options: Any) -> dict[str, Any]:
    """``peer_compare`` with the servers' databases and logs in ``workdir``, or in a temporary
    directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="plan_benchmark_") as scratch:
        path = Path(workdir or scratch).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return peer_compare(PeerOptions(workdir=path, **options))


def _report(
    options: PeerOptions,
    tool: str,
    runs: dict[str, list[dict[str, Any]]],
    receipts: int,
    peer_workers: int,
) -> dict[str, Any]:
    pairs = zip(runs["ours"], runs["peer"], strict=True)
    ratios = [o["req_per_s"] / max(p["req_per_s"], 0.1) for o, p in pairs]
    ours, peer = side_summary(runs["ours"]), side_summary(runs["peer"])
    ratio = round(statistics.median(ratios), 3)
    return {
        "against": str(options.against),
        "load": {
            "tool": tool,
            "threads": options.threads,
            "connections": options.connections,
            "duration_s": options.duration,
            "warmup_s": options.warmup,
            "rounds": options.rounds,
        },
        "traces": options.traces,
        "n": options.n,
        "ours": {
            "server": f"granian, {options.workers} workers (memoryproject/server.py), "
            "SQLite file, API-key auth, a chained receipt per plan",
            **ours,
        },
        "peer": {
            "server": f"CognOS gateway, uvicorn, {peer_workers} worker(s), SQLite",
            **peer,
        },
        "ratio_req_per_s": ratio,
        "ratios_per_round": [round(r, 3) for r in ratios],
        # Every plan answered, warm-up included, appends one receipt to the chained log (wrk
        # leaves the requests in flight at the end of a run unread: they are receipted too).
        "ours_requests_total": ours["requests"] + runs["ours_warmup"][0]["requests"],
        "receipts_written": receipts,
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO and ours["non_2xx"] == 0,
    }


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
        _memory_line(result["ours_workers_memory"], result["ours"]["requests"]),
        f"disk: a synced SQLite commit takes {result['disk_commit_ms']:.2f} ms (p50) here; "
        "both sides sync every plan's commit before answering (the peer its rollback journal, ours "
        "its WAL, once the write turn has passed)",
        f"ratio (req/s, median of rounds {result['ratios_per_round']}): "
        f"{result['ratio_req_per_s']:.2f}x; target >= {result['target_ratio']}x with zero "
        "non-2xx: " + ("met" if result["meets_target"] else "NOT met"),
    ]
    return "\n".join(lines) + "\n"


def _memory_line(memory: dict[str, list[dict[str, float]]], plans: int) -> str:
    def rss(key: str) -> str:
        return ", ".join(f"{w.get('rss_mb', 0):.1f}" for w in memory.get(key, [])) or "-"

    return (
        f"ours: workers' RSS after the warm-up {rss('after_warmup')} MiB, after the rounds' "
        f"{plans} plans {rss('at_end')} MiB"
    )
