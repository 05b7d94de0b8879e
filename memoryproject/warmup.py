"""What a server's master process loads before it forks its workers (``gunicorn_conf``), so
each worker starts with it, shared copy-on-write. Each app registers its warmers in its
``AppConfig.ready()``; the server's start-up runs them without importing the apps."""

from __future__ import annotations

from collections.abc import Callable

_warmers: list[Callable[[], object]] = []


def warmer_register(warmer: Callable[[], object]) -> None:
    """Called by an app when it is ready (once per warmer)."""
    if warmer not in _warmers:
        _warmers.append(warmer)


def warm() -> None:
    """Runs every registered warmer, in the order the apps registered them."""
    for warmer in _warmers:
        warmer()
