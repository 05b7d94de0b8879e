"""The REST API's server (memoryproject/server.py) serving on a load test's database: started in its own
process group so that it can be stopped, or killed with SIGKILL as a crash would, whole."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from benchmarks.loadtest.target import REPO, LoadTestError

#: The command that serves the REST API as deployed (its options follow).
SERVER = (sys.executable, "-m", "memoryproject.server")


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


class AppServer:
    """``python -m memoryproject.server`` on 127.0.0.1:``port``."""

    def __init__(
        self,
        *,
        env: dict[str, str],
        port: int,
        log_path: Path,
        workers: int = 2,
        threads: int = 8,
    ) -> None:
        self.env = env
        self.port = port
        self.log_path = log_path
        self.workers = workers
        self.threads = threads
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def command(self) -> list[str]:
        return [
            *SERVER,
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(self.workers),
            "--threads",
            str(self.threads),
            "--log-level",
            "warning",
        ]

    def start(self, timeout: float = 60) -> None:
        """Starts the server and waits until /healthz answers 200."""
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Starts the server without waiting for it (see wait_ready)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.command(),
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        """Waits until /healthz answers 200; kills the server if it does not in ``timeout``."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while not _healthy(self.port):
            if self.process.poll() is not None:
                raise LoadTestError(f"the server on port {self.port} exited:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise LoadTestError(
                    f"the server on port {self.port} did not answer:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def _signal(self, signum: int) -> bool:
        if self.process is None or self.process.poll() is not None:
            return False
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL to the main process and every worker at once, as a crash would."""
        if self._signal(signal.SIGKILL) and self.process is not None:
            self.process.wait()
        self._close_log()

    def stop(self, timeout: float = 20) -> None:
        """A graceful stop (SIGTERM), then SIGKILL if it takes longer than ``timeout``."""
        if self._signal(signal.SIGTERM) and self.process is not None:
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""
