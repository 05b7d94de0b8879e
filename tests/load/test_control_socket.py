"""gunicorn's control socket (``gunicornc``) is off unless a server is given a path of its own.

gunicorn opens it by default at one path per user, so a second server the same user started
took the first one's socket over: commands meant for one server reached the other, and the
first to stop removed the other's socket. Real servers, started as deployed and as the load
tests start them, and the real ``gunicornc`` client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.loadtest.server import AppServer
from benchmarks.loadtest.target import target_prepare
from tests.load.servers import started

pytestmark = pytest.mark.slow


def _user_dirs(tmp_path: Path) -> dict[str, str]:
    """A home and a runtime directory of this test's own, where gunicorn puts its socket by
    default."""
    home, runtime = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    return {"HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}


def _control_pid(socket_path: Path) -> int:
    """The master pid the server listening at ``socket_path`` reports to ``gunicornc``."""
    command = [sys.executable, "-m", "gunicorn.ctl.cli", "-s", str(socket_path)]
    answer = subprocess.run(
        [*command, "-c", "show stats", "-j"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return int(json.loads(answer.stdout)["pid"])


def test_servers_of_one_user_open_no_shared_control_socket(load_database_url, tmp_path):
    target = target_prepare(load_database_url("ctl"))
    dirs = _user_dirs(tmp_path)
    servers = [
        started(target, tmp_path, "deployed", workers=1, threads=1, **dirs),  # gunicorn_conf.py
        # the load tests' own options
        started(target, tmp_path, "load", server_class=AppServer, workers=1, threads=1, **dirs),
    ]
    try:
        made = [p for d in dirs.values() for p in Path(d).rglob("*") if p.is_socket()]
    finally:
        for server in servers:
            server.stop()
    assert made == []


def test_a_control_socket_named_for_a_server_reaches_that_server(load_database_url, tmp_path):
    target = target_prepare(load_database_url("ctlpath"))
    dirs = _user_dirs(tmp_path)
    paths = [tmp_path / "first.ctl", tmp_path / "second.ctl"]
    servers = [
        started(
            target,
            tmp_path,
            path.stem,
            workers=1,
            threads=1,
            GUNICORN_CONTROL_SOCKET=str(path),
            **dirs,
        )
        for path in paths
    ]
    try:
        answered = [_control_pid(path) for path in paths]
        masters = [server.process.pid for server in servers]
    finally:
        for server in servers:
            server.stop()
    assert answered == masters
    assert not any(p.is_socket() for d in dirs.values() for p in Path(d).rglob("*"))
