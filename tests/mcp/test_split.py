"""A stdio `manage.py mcp_serve` runs in two processes: the MCP SDK in the one the client
started (the front), Django and the compiler index in its child (the back). The agent sees one
server: the same tools, resources and prompts as ``--one-process``; the back ends with the
front, and the front with the back."""

from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import pytest
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult

from memoryproject.mcp_calls import manifest, registry_build
from memoryproject.mcp_split import BACK_ENDED, split_wanted

from .conftest import INITIALIZE, REPO, free_port, server_env

pytestmark = pytest.mark.slow


async def _published(session) -> dict:
    tools = (await session.list_tools()).tools
    resources = (await session.list_resources()).resources
    prompts = (await session.list_prompts()).prompts
    return json.loads(
        json.dumps(
            {
                kind: [item.model_dump(mode="json", by_alias=True) for item in items]
                for kind, items in (
                    ("tools", tools),
                    ("resources", resources),
                    ("prompts", prompts),
                )
            }
        )
    )


def test_two_processes_publish_what_one_process_does(mcp):
    split = mcp(_published)
    single = mcp(_published, "--one-process")
    assert [tool["name"] for tool in split["tools"]] == [tool["name"] for tool in single["tools"]]
    assert split == single
    assert len(split["tools"]) >= 14 and split["resources"] and split["prompts"]


def test_each_tool_publishes_the_schema_the_sdk_derives_from_its_output_model(db):
    """The back names each tool's output schema without the SDK: it is the one the SDK itself
    derives from a function returning the output model."""
    registry = registry_build()
    published = {tool["name"]: tool["output_schema"] for tool in manifest(registry)["tools"]}
    for name, operation in registry.operations.items():

        def call() -> CallToolResult:
            raise NotImplementedError

        call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [], return_annotation=Annotated[CallToolResult, operation.output]
        )
        assert published[name] == func_metadata(call).output_schema, name


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    found: list[int] = []
    for task in tasks.iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _started(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """A stdio server that has answered `initialize`, and its back's process id."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_serve", "--scope", "write"],
        cwd=REPO,
        env={**server_env(), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.log").open("w"),
        text=True,
    )
    assert process.stdin and process.stdout
    process.stdin.write(INITIALIZE + "\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    assert answer["result"]["serverInfo"]["name"] == "memoryproject"
    backs = _children(process.pid)
    assert len(backs) == 1, backs
    return process, backs[0]


def _gone(pid: int, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_closing_stdin_ends_both_processes(mcp_db, tmp_path):
    process, back = _started(tmp_path)
    assert process.stdin
    process.stdin.close()
    assert process.wait(timeout=20) == 0
    assert _gone(back), "the back outlived the front"


def test_a_killed_front_leaves_no_back_behind(mcp_db, tmp_path):
    process, back = _started(tmp_path)
    try:
        process.kill()
        process.wait(timeout=10)
        # The back is now another process's child: it must see the closed socket and end.
        assert _gone(back), "the back outlived a killed front"
    finally:
        if _alive(back):
            os.kill(back, signal.SIGKILL)


def test_a_dead_back_ends_the_front_with_an_error(mcp_db, tmp_path):
    process, back = _started(tmp_path)
    os.kill(back, signal.SIGKILL)
    assert process.wait(timeout=20) == 1
    assert BACK_ENDED in (tmp_path / "stderr.log").read_text()


@pytest.mark.parametrize(
    ("args", "split"),
    [
        ([], True),
        (["--scope", "write"], True),
        (["--transport", "stdio"], True),
        (["--transport=stdio"], True),
        (["--transport", "streamable-http"], False),
        (["--transport=streamable-http"], False),
        (["--one-process", "--scope", "write"], False),
        (["--help"], False),
    ],
)
def test_which_commands_start_two_processes(args, split):
    assert split_wanted(args) is split


def test_an_abbreviated_transport_is_served_by_the_back_and_stopped_through_the_front(
    mcp_db, tmp_path
):
    """``--trans streamable-http`` reads as another transport only once the command parses
    it, in the back: the back serves HTTP, and the front, which the caller holds, passes a
    stop on to it."""
    port = free_port()
    port_args = ("--port", str(port))
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_serve", "--trans", "streamable-http", *port_args],
        cwd=REPO,
        env={**server_env(), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "stderr.log").open("w"),
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (tmp_path / "stderr.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the back never listened"
                time.sleep(0.1)
        backs = _children(process.pid)
        assert len(backs) == 1
        process.terminate()
        # As one process serving HTTP ends: uvicorn stops, then ends by the signal it got.
        assert process.wait(timeout=20) in (0, -signal.SIGTERM)
        assert _gone(backs[0]), "the back kept serving after the front was stopped"
    finally:
        if process.poll() is None:
            process.kill()
