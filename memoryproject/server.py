"""The REST API's server: ``python -m memoryproject.server [--bind HOST:PORT] [--workers N]``.

granian (an HTTP server written in Rust) runs the WSGI application in worker processes. HTTP
parsing, keep-alive and writing the answer happen in Rust threads that never hold the
interpreter's lock; each worker calls the application from one Python thread of its own, so
one worker's threads never contend for the lock around the database's write turn.

This process loads the application first (``preload``): settings, every app and view, secret
screening's rules and every project's compiler index (from its snapshot), with the cyclic
collector paused and what start-up built then frozen out of its generations
(`memoryproject.collector`). The workers are forked from it and start with all of that,
shared copy-on-write; a worker forked later (after a crash) only reads the rows written since.
``SERVER_PRELOAD=0``: each worker loads its own, on first use.

Settings come from the environment, and the command line overrides them:

- ``SERVER_BIND`` (``--bind``), ``HOST:PORT``, default ``127.0.0.1:8000``;
- ``SERVER_WORKERS`` (``--workers``), default 2;
- ``SERVER_THREADS`` (``--threads``), Python threads per worker, default 1;
- ``SERVER_ACCESS_LOG=1`` (``--access-log``), one line per request;
- ``SERVER_PRELOAD=0``, see above.

Forwarded headers are the application's to read (`memoryproject.proxies`, ``TRUSTED_PROXIES``):
granian sets the peer's address as ``REMOTE_ADDR`` and decides no scheme from a header.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memoryproject.admin_discovery import admin_discovery_defer
from memoryproject.collector import start_up_pause, start_up_settle
from memoryproject.envvars import flag

TARGET = "memoryproject.wsgi:application"
#: The names a request itself sets in its WSGI environ (CGI's, and one per header).
_REQUEST_NAMES = frozenset(
    {
        "REQUEST_METHOD",
        "SCRIPT_NAME",
        "PATH_INFO",
        "QUERY_STRING",
        "CONTENT_TYPE",
        "CONTENT_LENGTH",
        "SERVER_NAME",
        "SERVER_PORT",
        "SERVER_PROTOCOL",
        "REMOTE_ADDR",
        "REMOTE_PORT",
        "RAW_URI",
    }
)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    threads: int = 1
    preload: bool = True
    access_log: bool = False
    log_level: str = "info"


def _bind(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bind: expected HOST:PORT with a port from 1 to 65535, got {text!r}")
    return host.strip("[]"), int(port)


def _count(name: str, text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{name}: expected a whole number of at least 1, got {text!r}")
    return int(text)


def server_settings(
    environ: Mapping[str, str], argv: Sequence[str] | None = None
) -> ServerSettings:
    """The settings from ``environ`` (``SERVER_*``), then the command line's options; a
    ValueError names the setting and the rule it breaks."""
    parser = argparse.ArgumentParser(prog="python -m memoryproject.server")
    parser.add_argument("--bind", default=environ.get("SERVER_BIND", "127.0.0.1:8000"))
    parser.add_argument("--workers", default=environ.get("SERVER_WORKERS", "2"))
    parser.add_argument("--threads", default=environ.get("SERVER_THREADS", "1"))
    parser.add_argument("--access-log", action="store_true")
    parser.add_argument("--log-level", default=environ.get("SERVER_LOG_LEVEL", "info"))
    options = parser.parse_args(argv)
    host, port = _bind(options.bind)
    levels = {"critical", "error", "warning", "info", "debug"}
    if options.log_level not in levels:
        raise ValueError(f"log level: expected one of {sorted(levels)}, got {options.log_level!r}")
    return ServerSettings(
        host=host,
        port=port,
        workers=_count("workers", str(options.workers)),
        threads=_count("threads", str(options.threads)),
        preload=flag(environ.get("SERVER_PRELOAD"), True),
        access_log=options.access_log or flag(environ.get("SERVER_ACCESS_LOG"), False),
        log_level=options.log_level,
    )


def environ_isolated(app: WSGIApp, inherited: Mapping[str, str]) -> WSGIApp:
    """``app`` with the server process's environment (``inherited``) kept out of each
    request's WSGI environ. granian starts every request's environ from a copy of
    ``os.environ`` (as CGI did), which would put the secret key and the database's URL, with
    its password, in ``request.META``, and an ``HTTP_PROXY`` variable there as a ``Proxy``
    header the client never sent. A name only the environment can set is removed; one a
    request sets too (a header's ``HTTP_*``, CGI's names) is removed where it still holds the
    environment's value."""
    own = tuple(name for name in inherited if not _request_may_set(name))
    shared = tuple((name, value) for name, value in inherited.items() if _request_may_set(name))

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        for name in own:
            environ.pop(name, None)
        for name, value in shared:
            if environ.get(name) == value:
                del environ[name]
        return app(environ, start_response)

    return application


def _request_may_set(name: str) -> bool:
    return name.startswith("HTTP_") or name in _REQUEST_NAMES or name.startswith("wsgi.")


def _application_load(_target: str = TARGET) -> WSGIApp:
    """The WSGI application, wrapped (`environ_isolated`); granian calls this in each worker
    (an import this process already made, with ``preload``)."""
    from memoryproject.wsgi import application

    return environ_isolated(application, dict(os.environ))


def _preload() -> None:
    """Loads the application, imports every view and warms the indexes (in a thread of its
    own, beside the imports), then closes this process's database connections: a forked
    worker must never share them. A failed warm-up is logged, and each worker loads its own."""
    from django.db import connections
    from django.urls import get_resolver

    from memoryproject.warmup import warm_in_background
    from memoryproject.wsgi import application  # noqa: F401 - Django set up, DRF shimmed

    warming = warm_in_background()
    try:
        get_resolver().url_patterns  # noqa: B018 - imports every view once, here
    finally:
        warming.join()
        connections.close_all()


def start_up(settings: ServerSettings) -> None:
    """What this process does before it forks the workers: the admin's modules left to each
    worker's first admin or console page (memoryproject.admin_discovery); the collector paused
    while the application loads (``preload``), then what start-up built frozen out of its
    generations, so that no collection in a worker writes to those pages and they stay
    shared."""
    admin_discovery_defer()
    start_up_pause()
    try:
        if settings.preload:
            _preload()
    finally:
        start_up_settle()


def serve(settings: ServerSettings) -> None:
    """Loads (``preload``) and serves until SIGTERM or SIGINT; SIGHUP replaces the workers."""
    from granian.constants import HTTPModes, Interfaces
    from granian.log import LogLevels
    from granian.server import Server

    start_up(settings)
    if settings.preload:
        # The workers are forked from this process, loaded (granian follows the start method;
        # some Pythons default to another where sockets and the loaded application would not
        # be inherited).
        multiprocessing.set_start_method("fork", force=True)
    Server(
        TARGET,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.WSGI,
        workers=settings.workers,
        blocking_threads=settings.threads,
        http=HTTPModes.http1,
        websockets=False,
        log_level=LogLevels(settings.log_level),
        log_access=settings.access_log,
        respawn_failed_workers=True,
        workers_kill_timeout=10,
    ).serve(target_loader=_application_load)


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
    try:
        settings = server_settings(os.environ, argv)
    except ValueError as error:
        raise SystemExit(f"memoryproject.server: {error}") from None
    serve(settings)


if __name__ == "__main__":
    main()
