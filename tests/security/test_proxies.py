"""Forwarded headers count from TRUSTED_PROXIES only, on both doors.

REST is served by `python -m memoryproject.server` (granian) as deployed and MCP by `mcp_serve`
over streamable HTTP, both with TRUSTED_PROXIES=127.0.0.2: a request whose connection comes from
127.0.0.2 plays the proxy, one from 127.0.0.1 a client that reaches the server directly; the
server itself believes no forwarded header. A client forging X-Forwarded-For is counted at its
own address, so rotating the header after the failed-authentication limit still gets 429; behind
the trusted proxy each forwarded client is counted apart; and a key tried from many addresses is
stopped by its own bucket.
"""

from __future__ import annotations

import http.client
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from django.db import connection
from django.test import Client
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memoryproject.proxies import client_address, proxied_scope, proxy_networks
from tests.mcp.conftest import (
    INITIALIZE,
    REPO,
    free_port,
    server_env,
    start_http_server,
    stop_http_server,
    write_key,
)

PROXY, DIRECT = "127.0.0.2", "127.0.0.1"
LIMIT = 3
SERVED = {"TRUSTED_PROXIES": PROXY, "MEMORY_AUTH_FAILURES": str(LIMIT)}
_guesses = itertools.count()


def guess() -> str:
    """A key nobody has, with a prefix of its own each time (so no key bucket fills)."""
    return f"guess{next(_guesses):05d}.not-the-secret"


# --- the one rule, without a server ------------------------------------------------------------

NETWORKS = proxy_networks(["10.0.0.0/8", "::1"])


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "client"),
    [
        ("192.0.2.1", "203.0.113.7", "192.0.2.1"),  # not a proxy: its headers say nothing
        ("10.0.0.2", None, "10.0.0.2"),  # the proxy's own request (a health check)
        ("10.0.0.2", "203.0.113.7", "203.0.113.7"),
        ("10.0.0.2", "198.51.100.1, 203.0.113.7", "203.0.113.7"),  # left of it: the client's
        ("10.0.0.2", "203.0.113.7, 10.0.0.5", "203.0.113.7"),  # a chain of trusted proxies
        ("10.0.0.2", "10.0.0.9, 10.0.0.5", "10.0.0.9"),  # all trusted: the leftmost
        ("10.0.0.2", "203.0.113.7:4711", "203.0.113.7"),
        ("10.0.0.2", "[2001:db8::7]:443", "2001:db8::7"),
        ("10.0.0.2", "::ffff:203.0.113.7", "203.0.113.7"),
        ("10.0.0.2", "203.0.113.7, , ", "203.0.113.7"),
        ("10.0.0.2", "203.0.113.7, unknown", "10.0.0.2"),  # no address: stop at the proxy
        ("::1", "2001:db8::7", "2001:db8::7"),
        ("", "203.0.113.7", ""),  # no peer address (a Unix socket): nothing to trust
    ],
)
def test_the_client_is_the_rightmost_hop_that_is_not_a_trusted_proxy(peer, forwarded_for, client):
    assert client_address(peer, forwarded_for, networks=NETWORKS) == client


@pytest.mark.parametrize("entry", ["*", "10.0.0.1/8", "proxy.example.com", "10.0.0"])
def test_an_unreadable_trusted_proxy_entry_is_refused_naming_it(entry):
    with pytest.raises(ValueError, match=r"'\*' would believe|is not an IP address"):
        proxy_networks([entry])


def _settings_process(**env: str) -> subprocess.CompletedProcess[str]:
    code = "from django.conf import settings; print(settings.TRUSTED_PROXIES)"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={
            **{k: v for k, v in os.environ.items() if k != "TRUSTED_PROXIES"},
            "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
            "SECRET_KEY": "x" * 60,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_setting_is_read_from_the_environment_and_checked_at_start():
    assert _settings_process().stdout.strip() == "[]"
    read = _settings_process(TRUSTED_PROXIES=" 10.0.0.0/8, ::1 ,")
    assert read.stdout.strip() == "['10.0.0.0/8', '::1']"
    bad = _settings_process(TRUSTED_PROXIES="10.0.0.1/8")
    assert bad.returncode != 0 and "TRUSTED_PROXIES: '10.0.0.1/8'" in bad.stderr
    proto = _settings_process(TRUST_X_FORWARDED_PROTO="1")
    assert proto.returncode != 0 and "TRUST_X_FORWARDED_PROTO=1 needs TRUSTED_PROXIES" in (
        proto.stderr
    )
    assert _settings_process(TRUST_X_FORWARDED_PROTO="1", TRUSTED_PROXIES=PROXY).returncode == 0


@pytest.mark.django_db
def test_x_forwarded_proto_counts_from_a_trusted_proxy_only(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    forged = Client().get("/v1/projects", REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_PROTO="https")
    assert forged.status_code == 301 and forged["Location"].startswith("https://")
    proxied = Client().get("/v1/projects", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_PROTO="https")
    assert proxied.status_code == 401


def test_the_asgi_door_applies_the_same_rule(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    headers = [
        (b"x-forwarded-for", b"198.51.100.1"),
        (b"X-Forwarded-For", b"203.0.113.7"),  # a second line: both count, in order
        (b"x-forwarded-proto", b"https"),
        (b"x-real-ip", b"198.51.100.2"),
        (b"forwarded", b"for=198.51.100.3"),
        (b"authorization", b"Bearer k"),
    ]
    scope = {"type": "http", "scheme": "http", "client": ("10.0.0.2", 5000), "headers": headers}
    proxied = proxied_scope(scope)
    assert proxied["client"] == ("203.0.113.7", 0) and proxied["scheme"] == "https"
    direct = proxied_scope({**scope, "client": ("192.0.2.1", 5000)})
    assert direct["client"] == ("192.0.2.1", 5000) and direct["scheme"] == "http"
    assert direct["headers"] == [(b"authorization", b"Bearer k")]


# --- over real HTTP ----------------------------------------------------------------------------


def ask(
    port: int,
    *,
    source: str,
    path: str = "/v1/projects",
    key: str | None = None,
    headers: dict[str, str] | None = None,
) -> int:
    """The status of one request whose connection comes from ``source``."""
    sent = dict(headers or {})
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    method, body = "GET", None
    if path == "/mcp":
        method, body = "POST", INITIALIZE
        sent |= {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=15, source_address=(source, 0))
    try:
        client.request(method, path, body=body, headers=sent)
        response = client.getresponse()
        response.read()
        return response.status
    finally:
        client.close()


@dataclass
class Served:
    port: int
    path: str


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_server(
    tmp_path: Path, env: dict[str, str], *, unset: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], int]:
    """The REST API's server as deployed (``python -m memoryproject.server``), one worker
    (throttles counted in one process's memory), once it answers; ``env`` added to the
    environment, the variables named in ``unset`` taken out."""
    port = free_port()
    log = tmp_path / f"server_{port}.log"
    inherited = {name: value for name, value in os.environ.items() if name not in unset}
    with log.open("wb") as errlog:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "memoryproject.server"),
                *("--bind", f"127.0.0.1:{port}", "--workers", "1", "--log-level", "warning"),
            ],
            cwd=REPO,
            env={**inherited, **server_env(), "SERVER_PRELOAD": "0", **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise AssertionError(f"the server exited early:\n{log.read_text()}")
        try:
            if ask(port, source=DIRECT, path="/healthz") == 200:
                return process, port
        except OSError:
            pass
        if time.monotonic() > deadline:
            _stop(process)
            raise AssertionError(f"the server did not answer:\n{log.read_text()}")
        time.sleep(0.2)


@pytest.fixture(params=["rest", "mcp"])
def served(request, transactional_db, tmp_path) -> Iterator[Served]:
    """The door under test, with TRUSTED_PROXIES=127.0.0.2 and a limit of 3 failures."""
    if request.param == "rest":
        process, port = start_server(tmp_path, SERVED)
        try:
            yield Served(port, "/v1/projects")
        finally:
            _stop(process)
    else:
        server = start_http_server(tmp_path, env=SERVED)
        try:
            yield Served(server.port, "/mcp")
        finally:
            stop_http_server(server)
    connection.close()


@pytest.mark.slow
def test_a_forged_forwarded_for_from_an_untrusted_peer_does_not_change_the_counted_address(
    served,
):
    def forged(i: int) -> dict[str, str]:
        return {
            "X-Forwarded-For": f"198.51.100.{i}",
            "X-Real-IP": f"198.51.100.{i}",
            "Forwarded": f"for=198.51.100.{i}",
        }

    statuses = [
        ask(served.port, source=DIRECT, path=served.path, key=guess(), headers=forged(i))
        for i in range(LIMIT + 3)
    ]
    assert statuses == [401] * LIMIT + [429] * 3


@pytest.mark.slow
def test_clients_behind_a_trusted_proxy_are_counted_apart(served):
    def via_proxy(client: str, key: str) -> int:
        headers = {"X-Forwarded-For": client}
        return ask(served.port, source=PROXY, path=served.path, key=key, headers=headers)

    assert [via_proxy("203.0.113.7", guess()) for _ in range(LIMIT)] == [401] * LIMIT
    assert via_proxy("203.0.113.7", guess()) == 429
    # A hop the client put in front of the proxy's own does not make it someone else.
    assert via_proxy("198.51.100.9, 203.0.113.7", guess()) == 429
    assert via_proxy("203.0.113.8", guess()) == 401  # another client behind the same proxy
    # The proxy's own connection without a forwarded client is one more address.
    assert ask(served.port, source=PROXY, path=served.path, key=guess()) == 401
    # A client reaching the server directly is counted at its address, as before.
    assert ask(served.port, source=DIRECT, path=served.path, key=guess()) == 401


@pytest.mark.slow
def test_a_key_tried_from_many_addresses_is_stopped_by_its_own_bucket(served):
    real = write_key()
    wrong_secret = f"{real.partition('.')[0]}.wrong-secret"
    without_dot = "nodotkey1234567890"

    def via_proxy(client: str, key: str) -> int:
        headers = {"X-Forwarded-For": client}
        return ask(served.port, source=PROXY, path=served.path, key=key, headers=headers)

    for key, network in ((wrong_secret, "203.0.113"), (without_dot, "198.51.100")):
        tries = [via_proxy(f"{network}.{i}", key) for i in range(1, LIMIT + 1)]
        assert tries == [401] * LIMIT, key
        assert via_proxy(f"{network}.200", key) == 429, key  # a fresh address: the key waits
        # ... and only the key: that address may still try another.
        assert via_proxy(f"{network}.200", guess()) == 401, key
    # The genuine key is blocked with its prefix while the guessing lasts.
    assert via_proxy("192.0.2.50", real) == 429
    # Forging the address from outside the proxy changes nothing either.
    forged = {"X-Forwarded-For": "192.0.2.51"}
    assert ask(served.port, source=DIRECT, path=served.path, key=without_dot, headers=forged) == 429


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_mcp_client_behind_the_trusted_proxy_works_while_a_neighbour_is_blocked(tmp_path):
    server = start_http_server(tmp_path, env=SERVED)
    try:
        key = write_key()
        blocked = {"X-Forwarded-For": "203.0.113.7"}
        for _ in range(LIMIT):
            ask(server.port, source=PROXY, path="/mcp", key=guess(), headers=blocked)
        assert ask(server.port, source=PROXY, path="/mcp", key=key, headers=blocked) == 429

        async def list_tools_as(client: str) -> int:
            headers = {"Authorization": f"Bearer {key}", "X-Forwarded-For": client}
            transport = httpx2.AsyncHTTPTransport(local_address=PROXY)
            async with (
                httpx2.AsyncClient(headers=headers, transport=transport, timeout=30) as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return len((await session.list_tools()).tools)

        assert anyio.run(list_tools_as, "203.0.113.8") > 0
    finally:
        stop_http_server(server)
        connection.close()


#: Scheme headers some servers believe from a loopback peer by default; none says https here.
SCHEME_HEADERS = {
    "X-Forwarded-Protocol": "ssl",
    "X-Forwarded-Ssl": "on",
    "X-Forwarded-Scheme": "https",
}


@pytest.mark.slow
@pytest.mark.parametrize("trusted", ["0", "1"])
def test_the_server_and_django_believe_x_forwarded_proto_from_the_trusted_proxy_only(
    tmp_path, transactional_db, trusted
):
    env = {"TRUSTED_PROXIES": PROXY, "SECURE_SSL_REDIRECT": "1", "TRUST_X_FORWARDED_PROTO": trusted}
    process, port = start_server(tmp_path, env)
    https = {"X-Forwarded-Proto": "https"}
    try:
        # From a client that reaches the server directly the header is never believed.
        assert ask(port, source=DIRECT, headers=https) == 301
        # From the proxy only when TRUST_X_FORWARDED_PROTO says so: the server decides nothing.
        assert ask(port, source=PROXY, headers=https) == (401 if trusted == "1" else 301)
        assert ask(port, source=PROXY) == 301
        # No other header makes a request https, not even from the trusted proxy.
        assert ask(port, source=PROXY, headers=SCHEME_HEADERS) == 301
    finally:
        _stop(process)
        connection.close()


@pytest.mark.slow
def test_without_trusted_proxies_the_server_believes_no_forwarded_header(
    tmp_path, transactional_db
):
    """As deployed with TRUSTED_PROXIES unset, a loopback peer is no proxy either: its
    forwarded scheme is not believed (the request is redirected to https) and a forged
    X-Forwarded-For does not spread its failed authentications over many addresses."""
    env = {"SECURE_SSL_REDIRECT": "1", "MEMORY_AUTH_FAILURES": str(LIMIT)}
    process, port = start_server(tmp_path, env, unset=("TRUSTED_PROXIES",))
    try:
        for source in (DIRECT, PROXY):
            assert ask(port, source=source, headers={"X-Forwarded-Proto": "https"}) == 301
            assert ask(port, source=source, headers=SCHEME_HEADERS) == 301
    finally:
        _stop(process)
    process, port = start_server(
        tmp_path, {"MEMORY_AUTH_FAILURES": str(LIMIT)}, unset=("TRUSTED_PROXIES",)
    )
    try:
        statuses = [
            ask(port, source=DIRECT, key=guess(), headers={"X-Forwarded-For": f"198.51.100.{i}"})
            for i in range(LIMIT + 1)
        ]
        assert statuses == [401] * LIMIT + [429]
    finally:
        _stop(process)
        connection.close()
