"""Servers the load tests start as deployed (``python -m memoryproject.server`` with the
deployment's settings) or with the load tests' own options, on a prepared database."""

from __future__ import annotations

from pathlib import Path

from benchmarks.loadtest.server import AppServer, free_port
from benchmarks.loadtest.target import Target
from benchmarks.plan.peer import OurServer


def started(
    target: Target,
    tmp_path: Path,
    name: str,
    *,
    server_class: type[AppServer] = OurServer,
    workers: int = 2,
    threads: int | None = None,
    **env: str,
) -> AppServer:
    """A server of ``server_class`` on ``target``'s database, answering, its log at
    ``tmp_path/<name>.log``; ``env`` added to the target's environment. ``threads`` None:
    the class's own (OurServer's one Python thread a worker, as deployed)."""
    options = {} if threads is None else {"threads": threads}
    server = server_class(
        env={**target.env, **env},
        port=free_port(),
        log_path=tmp_path / f"{name}.log",
        workers=workers,
        **options,
    )
    server.start()
    return server
