"""Crashes mid-stream: SIGKILL to the REST API's server (its main process and workers) while
clients write, and SIGKILL to an MCP stdio server while a real MCP client writes. Whatever the
service had acknowledged is there afterwards, and the injection log and the graph still
verify."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import anyio
import pytest
from django.db import connection
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_types import Implementation

from audit_app.models import InjectionRecord
from audit_app.selectors import injection_log_verify
from benchmarks.loadtest import AppServer, Workload, free_port, target_prepare, verify_all
from benchmarks.loadtest.target import REPO
from graph_app.integrity import integrity_verify
from graph_app.models import Episode, TemporalFact
from memoryproject.models import Project
from sessions_app.models import Trace
from tests.mcp.conftest import server_env

pytestmark = pytest.mark.slow


def acknowledged(workload: Workload) -> int:
    counts = workload.ledger.counts()
    return sum(n for kind, n in counts.items() if kind != "singular")


def wait_for(condition, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_server_killed_mid_stream_keeps_every_acknowledged_write(load_database_url, tmp_path):
    target = target_prepare(load_database_url("kill9"))
    server = AppServer(
        env=target.env, port=free_port(), log_path=tmp_path / "server.log", workers=2, threads=4
    )
    workload = Workload(ports=[server.port], key=target.write_key, clients=8, subjects=2, seed=9)
    try:
        server.start()
        workload.start()
        wait_for(lambda: acknowledged(workload) >= 40 and workload.in_flight >= 2)
        server.kill()  # SIGKILL to the main process and workers while clients wait for answers
        before = acknowledged(workload)
        time.sleep(1)
        server.start()  # clients reconnect on their own
        wait_for(lambda: acknowledged(workload) >= before + 40)
        workload.stop()
        check = verify_all(target, server.port, workload.ledger)
    finally:
        workload.stop()
        server.stop()

    # Requests in flight died with the server: not acknowledged, and not needed to be there.
    dropped = Counter()
    for stats in workload.stats.endpoints.values():
        dropped.update(stats.errors)
    assert dropped, "no request failed with the server"
    assert check.lost == {}, check.lost
    assert sum(check.acknowledged.values()) >= before + 40
    assert check.acknowledged["receipts"] > 0 and check.acknowledged["facts"] > 0
    assert check.injection_log["ok"], check.injection_log
    assert check.seqs_contiguous
    assert check.graph["verified"], check.graph
    assert check.singular_violations == []


# --- MCP over stdio -----------------------------------------------------------------------------


def identity_args(project: str, api_key: str) -> tuple[list[str], dict[str, str]]:
    """How mcp_serve is told who it runs as: an API key when it takes one, else a trusted
    local user's project (and scope, when it asks for one)."""
    help_text = subprocess.run(
        [sys.executable, "manage.py", "mcp_serve", "--help"],
        cwd=REPO,
        env={**os.environ, **server_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    if "--api-key" in help_text:
        return [], {"MEMORY_API_KEY": api_key}
    if "--scope" in help_text:
        return ["--project", project, "--scope", "write"], {}
    return ["--project", project], {}


class Writers:
    """Concurrent writers through every write tool of one session, until the server is gone:
    what was acknowledged, what a tool refused, and how many calls are waiting now."""

    CALLS = (
        (
            "save_session",
            "Active project: svc_{i}\nLast decision: queue retries with backoff\n"
            "Current output: src/svc_{i}/retry.py",
        ),
        ("memory_upsert_fact", "team_{i}"),
        ("memory_record_episode", "note {i}"),
        ("plan_context", ""),
    )

    def __init__(self) -> None:
        self.acks: list[tuple[str, Any]] = []
        self.refused: list[str] = []
        self.in_flight = 0

    @staticmethod
    def arguments(name: str, text: str) -> dict[str, Any]:
        return {
            "save_session": {"summary": text},
            "memory_upsert_fact": {
                "subject_id": "svc_mcp",
                "predicate": "owner",
                "object_value": text,
            },
            "memory_record_episode": {
                "category": "session_note",
                "title": text,
                "content": "Retries now keep a per-tenant budget.",
            },
            "plan_context": {"n": 5, "mode": "force"},
        }[name]

    async def write(self, session: ClientSession, index: int) -> None:
        for step in range(10_000):
            name, template = self.CALLS[(index + step) % len(self.CALLS)]
            self.in_flight += 1
            try:
                with anyio.fail_after(30):
                    result = await session.call_tool(
                        name, self.arguments(name, template.format(i=f"{index}_{step}"))
                    )
            except Exception:
                return  # the server died under this call: it was never acknowledged
            finally:
                self.in_flight -= 1
            if result.is_error:
                self.refused.append(f"{name}: {result.content[0].text if result.content else ''}")
            else:
                self.acks.append((name, result.structured_content or {}))


def ack_ids(acks: list[tuple[str, Any]]) -> dict[str, set[Any]]:
    ids: dict[str, set[Any]] = {
        "traces": set(),
        "facts": set(),
        "episodes": set(),
        "receipts": set(),
    }
    for name, data in acks:
        if name == "save_session":
            ids["traces"].add(data["trace_id"])
        elif name == "memory_upsert_fact":
            ids["facts"].add(data["fact"]["id"])
        elif name == "memory_record_episode":
            ids["episodes"].add(data["id"])
        else:
            ids["receipts"].add(data["injection_id"])
    return ids


@pytest.mark.django_db(transaction=True)
def test_mcp_server_killed_mid_stream_keeps_every_acknowledged_write(make_key, tmp_path):
    Project.objects.get_or_create(slug="default", defaults={"name": "default"})
    _, api_key = make_key(scope="write", projects=("crash",))
    args, extra_env = identity_args("crash", api_key)
    pidfile = tmp_path / "mcp.pid"
    params = StdioServerParameters(
        command="/bin/sh",
        # exec: the pid written is the server's own, the one SIGKILL is sent to
        args=[
            "-c",
            f'echo $$ > "{pidfile}"; exec "$0" manage.py mcp_serve "$@"',
            sys.executable,
            *args,
        ],
        cwd=str(REPO),
        env={**server_env(), **extra_env},
    )
    writers = Writers()
    killed_with_calls_waiting = 0

    async def crash() -> None:
        nonlocal killed_with_calls_waiting
        with (tmp_path / "mcp.stderr").open("a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(
                    read, write, client_info=Implementation(name="crash-test", version="1")
                ) as session,
            ):
                await session.initialize()
                async with anyio.create_task_group() as group:
                    for index in range(4):
                        group.start_soon(writers.write, session, index)
                    with anyio.fail_after(90):
                        while len(writers.acks) < 24 or writers.in_flight < 1:
                            await anyio.sleep(0.01)
                    killed_with_calls_waiting = writers.in_flight
                    os.kill(int(pidfile.read_text()), signal.SIGKILL)

    anyio.run(crash)
    connection.close()
    assert killed_with_calls_waiting >= 1
    ids = ack_ids(writers.acks)
    assert all(ids.values()), (ids, writers.refused[:5])  # every tool was acknowledged

    # A new server continues the same chain after the crash.
    async def again() -> dict[str, Any]:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("plan_context", {"n": 5, "mode": "force"})
            assert not result.is_error, result.content
            return result.structured_content or {}

    after = anyio.run(again)
    ids["receipts"].add(after["injection_id"])

    project = Project.objects.get(slug="crash")
    assert (
        set(map(str, Trace.objects.filter(project=project).values_list("trace_id", flat=True)))
        >= ids["traces"]
    )
    assert (
        set(TemporalFact.objects.filter(project=project).values_list("id", flat=True))
        >= ids["facts"]
    )
    assert (
        set(Episode.objects.filter(project=project).values_list("id", flat=True)) >= ids["episodes"]
    )
    assert set(InjectionRecord.objects.values_list("id", flat=True)) >= ids["receipts"]
    chain = injection_log_verify()
    assert chain.ok, (chain.witness, chain.warnings, chain.first_broken)
    seqs = sorted(InjectionRecord.objects.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    graph = integrity_verify(project=project)
    assert graph.verified, graph.problems
    assert (
        TemporalFact.objects.filter(
            project=project, subject__slug="svc_mcp", predicate="owner", valid_until__isnull=True
        ).count()
        == 1
    )
    connection.close()
