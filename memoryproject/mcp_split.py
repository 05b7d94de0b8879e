"""A stdio MCP server in two processes that start side by side, one on each core.

The MCP SDK's import and its tool registrations take about as long as Django's start-up and
the compiler index's load together (each 0.4 to 0.7 s of one core), and neither needs the
other until a call comes. So ``manage.py mcp_serve`` over stdio forks as it starts, before
either is imported, once it has imported what both need (``SHARED``: asyncio, pydantic and a
few more; ``front_fork``):

- the **front**, the process the client started, keeps stdin and stdout: it imports the SDK
  (memoryproject.mcp_server, never Django), waits for the manifest of tools, resources and
  prompts, answers the handshake and sends each call over a socket to the back;
- the **back**, its child, runs the command: it checks the identity and the database, loads
  the compiler index, sends the manifest (memoryproject.mcp_calls) and answers each call in a
  pool of threads (``back_serve``). It never imports the SDK; its stdin is closed and its stdout
  is its stderr, so nothing it prints reaches the protocol.

Each message is one line of JSON. The back ends when the front closes the socket (the client
closed stdin, or the front was killed), after finishing the calls it has begun; a refusal at
start (a bad key, pending migrations) is printed by the back, which exits, and the front exits
with its status. If the back dies while serving, the front exits too, so the client sees the
server end rather than calls that hang. ``--one-process`` serves stdio in one process.

This module imports neither Django nor the SDK.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

logger = logging.getLogger("memoryproject.mcp")

#: The back's end of the socket, named to the back by the front (a file descriptor number).
BACK_FD_ENV = "MEMORY_MCP_BACK_FD"

#: Calls the back runs at once (the SDK's own pool runs the front's calls at once too).
BACK_THREADS = 8

BACK_ENDED = "the server's worker process ended; restart the MCP server"

#: What both halves import, the front for the SDK and the back for Django and the service:
#: imported once, before the fork, so that neither imports it again. On a busy machine the two
#: halves share one session's part of the cores, and a first answer waits for the CPU time of
#: both (``tests/unit/test_door_imports.py`` checks each half imports every one of them).
SHARED = (
    "asyncio",
    "importlib.metadata",
    "inspect",
    "logging.config",
    "json",
    "html",
    "http.client",
    "email.utils",
    "ssl",
    "annotated_types",
    "pydantic.main",
    "pydantic.types",
    "pydantic.fields",
    "pydantic.functional_validators",
    "pydantic.json_schema",
    "cryptography.hazmat.primitives.ciphers",
    "cryptography.hazmat.primitives.hashes",
)


def split_wanted(args: list[str]) -> bool:
    """Whether ``manage.py mcp_serve`` with ``args`` serves stdio in two processes: not over
    streamable HTTP, not with ``--one-process``, not to print its help or version, not where
    a process cannot fork. (An abbreviated option the command reads as another transport is
    served by the back, the front passing signals on to it.)"""
    if not hasattr(os, "fork"):
        return False
    if any(arg in ("-h", "--help", "--version", "--one-process") for arg in args):
        return False
    for index, arg in enumerate(args):
        if arg == "--transport":
            return args[index + 1 : index + 2] == ["stdio"]
        if arg.startswith("--transport="):
            return arg == "--transport=stdio"
    return True


def back_socket() -> socket.socket | None:
    """In the back: its end of the socket to the front (None in a process started otherwise,
    or when the variable names no socket). Read once: a process the back starts (a snapshot
    writer) never sees it."""
    raw = os.environ.pop(BACK_FD_ENV, "")
    if not raw.isdigit():
        return None
    try:
        sock = socket.socket(fileno=int(raw))
    except OSError:
        return None
    if sock.type != socket.SOCK_STREAM or sock.family != socket.AF_UNIX:
        sock.detach()
        return None
    return sock


class _Lines:
    """One JSON object per line over a socket, sent whole by any thread."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.reader = sock.makefile("rb")
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        # ASCII: any text the client sent (a lone surrogate included) crosses as it came.
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self.lock:
            self.sock.sendall(data)

    def receive(self) -> dict[str, Any] | None:
        """The next message, or None once the other side has closed the socket."""
        line = self.reader.readline()
        return json.loads(line) if line else None


def back_serve(
    sock: socket.socket,
    manifest: dict[str, Any],
    answer: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    log_level: str,
) -> None:
    """In the back: sends ``manifest`` (and the front's ``log_level``), then answers each call
    with ``answer`` in a pool of threads until the front closes the socket, and finishes the
    calls begun."""
    lines = _Lines(sock)
    lines.send({"manifest": manifest, "log_level": log_level})

    def run(call_id: int, request: dict[str, Any]) -> None:
        try:
            reply = answer(request)
        except Exception as exc:  # answer guards its calls; this is the last resort
            logger.exception("MCP call failed")
            reply = {"error": "failed", "message": type(exc).__name__}
        try:
            lines.send({"id": call_id, **reply})
        except OSError:
            return  # the front has gone: nobody waits for this answer
        except (TypeError, ValueError):  # not JSON: the call still gets an answer
            logger.exception("MCP call answered with what JSON cannot carry")
            lines.send({"id": call_id, "error": "failed", "message": "unsendable answer"})

    with ThreadPoolExecutor(max_workers=BACK_THREADS, thread_name_prefix="mcp-call") as pool:
        try:
            while (message := lines.receive()) is not None:
                pool.submit(run, message.pop("id"), message)
        except (OSError, KeyboardInterrupt):
            pass
    sock.close()


class Remote:
    """In the front: an executor that sends each call to the back and waits for its answer."""

    def __init__(self, lines: _Lines):
        self.lines = lines
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.closing = False

    def listen(self) -> None:
        """Hands each answer to the call waiting for it; when the back has ended, ends the
        front too (its calls could never be answered)."""
        try:
            while (message := self.lines.receive()) is not None:
                with self.lock:
                    event, box = self.waiting.pop(message.pop("id"))
                box.append(message)
                event.set()
        except (OSError, ValueError):
            pass
        if not self.closing:
            print(f"memoryproject MCP server: {BACK_ENDED}", file=sys.stderr, flush=True)
            os._exit(1)

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        event, box = threading.Event(), list[dict[str, Any]]()
        with self.lock:
            call_id = next(self.ids)
            self.waiting[call_id] = (event, box)
        try:
            self.lines.send({"id": call_id, **request})
        except BaseException:
            with self.lock:
                self.waiting.pop(call_id, None)
            raise
        event.wait()
        return box[0]


def _back_status(pid: int) -> int:
    """The back's exit status, once it has ended; a signal the front gets meanwhile (the
    client stopping the server) is passed on to it."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def front_run(sock: socket.socket, back_pid: int) -> int:
    """In the front: imports the SDK while the back starts, then serves stdio with the back's
    manifest; the exit status is the back's when it refused to start."""
    from memoryproject.collector import start_up_settle
    from memoryproject.mcp_server import server_build  # the SDK, beside the back's start

    lines = _Lines(sock)
    try:
        first = lines.receive()
    except (OSError, ValueError):
        first = None
    if first is None or "manifest" not in first:
        sock.close()
        return _back_status(back_pid) or 1
    remote = Remote(lines)
    server = server_build(first["manifest"], remote, log_level=first.get("log_level", "WARNING"))
    threading.Thread(target=remote.listen, name="mcp-back", daemon=True).start()
    start_up_settle()
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        remote.closing = True
        sock.shutdown(socket.SHUT_RDWR)  # the back finishes the calls it has begun, and ends
    return _back_status(back_pid)


def shared_import() -> None:
    """Imports ``SHARED`` (no thread starts: the process can still fork safely)."""
    for name in SHARED:
        importlib.import_module(name)


def front_fork() -> None:
    """Imports what both halves need (``shared_import``), forks the back; returns in it (the
    command then runs there), and in the front serves and exits."""
    shared_import()
    front, back = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        front.close()
        os.environ[BACK_FD_ENV] = str(back.detach())
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        return
    back.close()
    status = front_run(front, pid)
    if status < 0:  # the back ended by a signal: so does the front, as one process would
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)
