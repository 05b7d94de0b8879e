"""New process to first compile, through each door as a client meets it.

``mcp_first_compile`` starts ``manage.py mcp_serve`` over stdio under the MCP SDK's own client
and times the handshake and the first ``memory_compile_context`` answer from the launch;
``web_first_compile`` starts the REST API's server as deployed (``python -m
memoryproject.server``, granian) and times the launch to the first ``POST /v1/graph/compile``
answer over HTTP. Both then read each server process's memory from
``/proc/<pid>/smaps_rollup``: RSS counts every page a process maps (pages shared with other
processes, the interpreter's and an index snapshot's file pages included), PSS divides each
shared page among the processes that map it, so the PSS of a server's processes add up. The
CPU time the server's processes had used when the first answer arrived (``first_cpu_ms``,
user and system, from ``/proc/<pid>/stat``, in all and per process) tells the work from the wait
on a busy machine.

The servers run as deployed: DEBUG off (plain HTTP on the loopback address), on the database
and snapshot directory of this process.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks.memory.coldstart import database_url, memory_of
from benchmarks.memory.synthetic import SCALES, Corpus, queries_for
from graph_app.graph_head import graph_head
from graph_app.snapshot import snapshot_read
from memoryproject.models import Project, Scope
from memoryproject.services import api_key_create

TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 0.02


def cpu_ms(pid: int) -> float:
    """User and system CPU time process ``pid`` has used, in ms (0 if gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return round((int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK"), 1)


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name, in parentheses, may hold spaces: the fields follow its last ")".
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def server_env() -> dict[str, str]:
    """This process's environment, run as deployed: DEBUG off, plain HTTP on loopback."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE") or settings.SETTINGS_MODULE,
        DATABASE_URL=database_url(),
        COMPILER_SNAPSHOT_DIR=str(settings.COMPILER_SNAPSHOT_DIR or ""),
        DEBUG="0",
        PLAIN_HTTP="1",
    )
    return env


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def mcp_first_compile(
    slug: str, query: str, *, pause: float = 0.0, soak: Soak = ()
) -> dict[str, Any]:
    """Launch of ``manage.py mcp_serve --project slug --scope read`` (stdio) to its
    ``initialize`` answer and to its first ``memory_compile_context`` answer, in ms, with the
    memory of its two processes (front and back, memoryproject.mcp_split) after that answer
    and the CPU time both spent until it. With ``pause`` (seconds) the client lists the tools and
    waits that long before its first call, as an agent's model reads them: ``first_call_ms``
    is then that call's own time. Then each compile of ``soak``, and the memory again."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=[
            str(Path(settings.BASE_DIR) / "manage.py"),
            *("mcp_serve", "--project", slug, "--scope", Scope.READ),
        ],
        cwd=str(settings.BASE_DIR),
        env=server_env(),
    )
    report: dict[str, Any] = {}

    async def run() -> None:
        before = set(children_of(os.getpid()))
        start = time.perf_counter()
        with anyio.fail_after(TIMEOUT_SECONDS), open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                report["handshake_ms"] = _ms(start)
                if pause:
                    await session.list_tools()
                    await anyio.sleep(pause)
                call = time.perf_counter()
                result = await session.call_tool(
                    "memory_compile_context", {"query": query, "max_tokens": 800}
                )
                report["first_compile_ms"] = _ms(start)
                if pause:
                    report["pause_s"], report["first_call_ms"] = pause, _ms(call)
                fronts = [p for p in children_of(os.getpid()) if p not in before]
                # Over stdio a server is two processes: the front and its back (mcp_split).
                roles = [(pid, "front") for pid in fronts]
                roles += [(back, "back") for pid in fronts for back in children_of(pid)]
                first_cpu = {pid: cpu_ms(pid) for pid, _ in roles}
                report["first_cpu_ms"] = round(sum(first_cpu.values()), 1)
                if result.is_error:
                    raise RuntimeError(f"memory_compile_context failed: {result.content}")
                second = time.perf_counter()
                await session.call_tool(
                    "memory_compile_context", {"query": query, "max_tokens": 800}
                )
                report["second_compile_ms"] = _ms(second)
                report["processes"] = [
                    {"role": role, "first_cpu_ms": first_cpu[pid], **memory_of(pid)}
                    for pid, role in roles
                ]
                for text, budget in soak:
                    await session.call_tool(
                        "memory_compile_context", {"query": text, "max_tokens": budget}
                    )
                if soak:
                    report["soaked"] = _soaked(len(soak), roles)

    anyio.run(run)
    return report


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(port: int, key: str, body: dict[str, Any]) -> int | None:
    """The status of one compile request, or None when nothing listens yet."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_SECONDS)
    try:
        connection.request(
            "POST",
            "/v1/graph/compile",
            body=json.dumps(body),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        answer = connection.getresponse()
        answer.read()
        return answer.status
    except ConnectionError:
        return None
    finally:
        connection.close()


def web_first_compile(
    slug: str, query: str, key: str, *, workers: int = 2, soak: Soak = ()
) -> dict[str, Any]:
    """Launch of the REST API's server (as deployed, ``workers`` workers) to its first
    ``POST /v1/graph/compile`` answer with API key ``key``, in ms, with the memory of its
    main process and workers after a few more answers (which reach every worker, most
    likely); then each compile of ``soak``, and the memory again."""
    port = _free_port()
    command = [sys.executable, "-m", "memoryproject.server"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", str(workers)]
    command += ["--log-level", "warning"]
    body = {"project": slug, "query": query, "max_tokens": 800}
    report: dict[str, Any] = {}
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=str(settings.BASE_DIR),
        env=server_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        status = None
        while status is None:
            if process.poll() is not None or time.perf_counter() - start > TIMEOUT_SECONDS:
                raise RuntimeError(f"the server did not answer: {_tail(process)}")
            status = _post(port, key, body)
            if status is None:
                time.sleep(POLL_SECONDS)
        report["first_compile_ms"] = _ms(start)
        first_cpu = {pid: cpu_ms(pid) for pid in [process.pid, *children_of(process.pid)]}
        report["first_cpu_ms"] = round(sum(first_cpu.values()), 1)
        if status != 200:
            raise RuntimeError(f"POST /v1/graph/compile answered {status}")
        second = time.perf_counter()
        _post(port, key, body)
        report["second_compile_ms"] = _ms(second)
        # Connections are spread over the workers' sockets: a few more reach every worker.
        for _ in range(4 * workers):
            _post(port, key, body)
        report["processes"] = [
            {"role": "main", "first_cpu_ms": first_cpu[process.pid], **memory_of(process.pid)}
        ] + [
            {"role": "worker", "first_cpu_ms": first_cpu.get(pid, 0.0), **memory_of(pid)}
            for pid in children_of(process.pid)
        ]
        for text, budget in soak:
            if _post(port, key, {"project": slug, "query": text, "max_tokens": budget}) != 200:
                raise RuntimeError(f"POST /v1/graph/compile failed for {text!r}")
        if soak:
            roles = [(process.pid, "main")]
            roles += [(pid, "worker") for pid in children_of(process.pid)]
            report["soaked"] = _soaked(len(soak), roles)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return report


def _tail(process: subprocess.Popen[bytes]) -> str:
    if process.poll() is None:
        return "(still running)"
    assert process.stderr is not None
    return process.stderr.read().decode(errors="replace")[-2000:]


def snapshot_state(slug: str) -> dict[str, Any]:
    """The snapshot a new server starts from: its revision, the graph's, and the writes between,
    whose rows the server replays before its first compile (None: no usable snapshot, the index
    is built from the rows)."""
    project = Project.objects.get(slug=slug)
    head = graph_head(project)
    snapshot = snapshot_read(project.pk)
    at = None if snapshot is None else snapshot.head.revision
    behind = None if at is None else head.revision - at
    return {"graph_revision": head.revision, "snapshot_revision": at, "writes_behind": behind}


#: (query, max_tokens) of each compile a server answers after its first ones.
Soak = Sequence[tuple[str, int]]
SOAK_BUDGETS = (400, 800, 2000, 4000)
#: Supersession chains the soak's queries aim at, half of them (the others name entities).
SOAK_CHAINS = 26


def soak_compiles(slug: str, count: int) -> list[tuple[str, int]]:
    """``count`` compiles of the benchmark's kinds of query over project ``slug`` (each entity
    and chain in turn, with another question), at budgets in turn: as an agent's sessions ask,
    not one query again and again."""
    if count <= 0:
        return []
    # What the queries need is read back from the stored graph (no scale of it is read).
    corpus = Corpus(Project.objects.get(slug=slug), SCALES["100k"], random.Random(7))
    corpus.read_back(chains=SOAK_CHAINS)
    queries = queries_for(corpus, count, random.Random("soak"))
    return [(text, SOAK_BUDGETS[n % len(SOAK_BUDGETS)]) for n, (text, _) in enumerate(queries)]


def _soaked(count: int, roles: list[tuple[int, str]]) -> dict[str, Any]:
    return {"compiles": count, "processes": [{"role": r, **memory_of(p)} for p, r in roles]}


def first_compiles(
    slug: str, query: str, *, repeat: int = 1, pause: float = 0.0, soak: int = 0
) -> dict[str, Any]:
    """Each door's figures, ``repeat`` times in turn (the machine's load average and the
    snapshot's state beside); with ``pause``, also the MCP server's first call made ``pause``
    seconds after the handshake; with ``soak``, each door's first run answers that many
    varied compiles more (``soak_compiles``) and its memory is read again."""
    state = snapshot_state(slug)
    compiles = soak_compiles(slug, soak)
    api_key, key = api_key_create(name="first compile", project_slugs=[slug], scope=Scope.READ)
    runs: dict[str, list[dict[str, Any]]] = {"mcp_stdio": [], "web": []}
    if pause:
        runs["mcp_paused"] = []
    try:
        for run in range(repeat):
            more = compiles if run == 0 else []
            runs["mcp_stdio"].append(mcp_first_compile(slug, query, soak=more))
            runs["web"].append(web_first_compile(slug, query, key, soak=more))
            if pause:
                runs["mcp_paused"].append(mcp_first_compile(slug, query, pause=pause))
    finally:
        api_key.delete()
    return {"query": query, "loadavg": _loadavg(), "snapshot": state, "runs": runs}


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return ""


def first_compile_lines(result: dict[str, Any]) -> list[str]:
    """A table: one row per door and run, one column per figure, memory per process."""
    state = result["snapshot"]
    if state["snapshot_revision"] is None:
        start = "no usable snapshot: each server builds the index from the rows"
    else:
        start = (
            f"snapshot at revision {state['snapshot_revision']} of {state['graph_revision']}: "
            f"each server replays {state['writes_behind']} writes"
        )
    lines = [
        f"new process to first compile (load average {result['loadavg']}; {start})",
        f"{'door':<10} {'handshake':>10} {'first':>9} {'first CPU':>10} {'second':>8}"
        "  per process: memory (RSS/PSS MiB), CPU at the first answer (ms)",
        "(mcp_paused: the first call made after a pause; 'first' is that call's own time)",
    ]
    for door, runs in result["runs"].items():
        for run in runs:
            memory = ", ".join(
                f"{p['role']} {p.get('rss_mb', '?')}/{p.get('pss_mb', '?')}"
                f" {p.get('first_cpu_ms', 0):.0f}"
                for p in run["processes"]
            )
            handshake = f"{run['handshake_ms']:.0f}" if "handshake_ms" in run else "-"
            first = run.get("first_call_ms", run["first_compile_ms"])
            lines.append(
                f"{door:<10} {handshake:>10} {first:>9.0f} "
                f"{run['first_cpu_ms']:>10.0f} {run['second_compile_ms']:>8.0f}  {memory}"
            )
            if "soaked" in run:
                soaked = ", ".join(
                    f"{p['role']} {p.get('rss_mb', '?')}/{p.get('pss_mb', '?')}"
                    for p in run["soaked"]["processes"]
                )
                lines.append(
                    f"{'':<10} after {run['soaked']['compiles']} varied compiles: {soaked}"
                )
    return lines
