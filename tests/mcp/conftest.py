"""Drive the real `manage.py mcp_serve` with the MCP SDK's own client.

Each scenario spawns the server as a subprocess over stdio (or streamable HTTP) against the
test database pytest-django created, so tests use `transaction=True`: rows must be committed
to be visible across processes. ORM checks run outside the client's event loop.

A stdio server runs as the local identity ``--scope write`` on ``default`` (or the ``--project``
a test passes) unless the test chooses another identity; an HTTP client sends the bearer key
it is given.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from django.db import connection
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from memoryproject.dbconfig import database_url_of
from memoryproject.models import Project
from memoryproject.services import api_key_create

REPO = Path(__file__).resolve().parents[2]
CLIENT_NAME = "pytest-mcp-client"
#: How receipts name the identity a stdio server runs as by default in these tests.
LOCAL_WRITE = "local:default/write"
IDENTITY_FLAGS = ("--scope", "--api-key")
#: A bare MCP initialize request, for tests that speak HTTP to the server themselves.
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
)

T = TypeVar("T")
Scenario = Callable[[ClientSession], Awaitable[T]]


def database_url() -> str:
    """DATABASE_URL of the test database this test runs on (after pytest-django's setup)."""
    return database_url_of(connection.settings_dict)


def server_env() -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings_test",
        "SECRET_KEY": "test-only-secret-key-not-for-production-use-0123456789",
        "DATABASE_URL": database_url(),
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "WARNING",
        # The test's own witness (tests/conftest.py) and the suite's signing key.
        **{
            name: os.environ[name]
            for name in ("WITNESS_DIR", "WITNESS_KEY_FILE")
            if name in os.environ
        },
    }


class McpRunner:
    """Runs async scenarios against a fresh `mcp_serve` process and returns their result."""

    def __init__(self, env: dict[str, str], stderr_path: Path) -> None:
        self.env = env
        self.stderr_path = stderr_path

    def params(self, *args: str) -> StdioServerParameters:
        if not any(flag in args for flag in IDENTITY_FLAGS) and "MEMORY_API_KEY" not in self.env:
            args = (*args, "--scope", "write")
        return StdioServerParameters(
            command=sys.executable,
            args=["manage.py", "mcp_serve", *args],
            cwd=str(REPO),
            env=self.env,
        )

    def __call__(self, scenario: Scenario[T], *args: str, client_name: str = CLIENT_NAME) -> T:
        async def main() -> T:
            with self.stderr_path.open("a") as errlog:
                async with (
                    stdio_client(self.params(*args), errlog=errlog) as (read, write),
                    ClientSession(
                        read, write, client_info=Implementation(name=client_name, version="1.0")
                    ) as session,
                ):
                    await session.initialize()
                    return await scenario(session)

        return anyio.run(main)

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""


@pytest.fixture
def mcp_db(transactional_db) -> Project:
    # Transactional tests flush the database between tests, data migrations included.
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "default"})
    return project


@pytest.fixture
def mcp(mcp_db, tmp_path) -> Iterator[McpRunner]:
    runner = McpRunner(server_env(), tmp_path / "mcp_serve.stderr")
    yield runner
    # Close our own connection so the flush after the test does not wait on it.
    connection.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServer:
    def __init__(self, process: subprocess.Popen[bytes], port: int, stderr_path: Path) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.stderr_path = stderr_path

    def run(self, scenario: Scenario[T], client_name: str = CLIENT_NAME, *, key: str) -> T:
        """Runs ``scenario`` in a session authenticated by the API key ``key``."""

        async def main() -> T:
            headers = {"Authorization": f"Bearer {key}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                streamable_http_client(self.url, http_client=http) as (read, write),
                ClientSession(
                    read, write, client_info=Implementation(name=client_name, version="1.0")
                ) as session,
            ):
                await session.initialize()
                return await scenario(session)

        return anyio.run(main)

    def stderr(self) -> str:
        return self.stderr_path.read_text()


def write_key(projects: tuple[str, ...] = ("default",), scope: str = "write") -> str:
    """A new API key named "mcp test" (committed, so a server process sees it); the test
    creates its projects explicitly."""
    return api_key_create(
        name="mcp test", project_slugs=list(projects), scope=scope, create_projects=True
    )[1]


def key_label(key: str) -> str:
    """How receipts name the API key ``key``."""
    return f"api_key:{key.partition('.')[0]} (mcp test)"


def start_http_server(tmp_path: Path, env: dict[str, str] | None = None) -> HttpServer:
    """`mcp_serve --transport streamable-http` on a free port, once it listens."""
    port = free_port()
    stderr_path = tmp_path / f"mcp_http_{port}.stderr"
    with stderr_path.open("wb") as errlog:
        process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "mcp_serve",
                "--transport",
                "streamable-http",
                "--port",
                str(port),
            ],
            cwd=REPO,
            env={**os.environ, **server_env(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise AssertionError(f"mcp_serve exited early:\n{stderr_path.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.monotonic() > deadline:
                stop_http_server(HttpServer(process, port, stderr_path))
                raise AssertionError(
                    f"mcp_serve did not listen:\n{stderr_path.read_text()}"
                ) from None
            time.sleep(0.1)
    return HttpServer(process, port, stderr_path)


def stop_http_server(server: HttpServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture
def mcp_http(mcp_db, tmp_path) -> Iterator[HttpServer]:
    server = start_http_server(tmp_path)
    try:
        yield server
    finally:
        stop_http_server(server)
        connection.close()


def structured(result: Any) -> dict[str, Any]:
    """The structured content of a successful tool result (fails with the error text)."""
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.structured_content is not None
    return result.structured_content


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))
