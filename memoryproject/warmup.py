"""What a server process loads before its first request: the REST API's main process before it
forks its workers (``memoryproject.server``), so each worker starts with it, shared
copy-on-write; the MCP server (``mcp_serve``) in the background as it starts, so the agent's
first call finds it loaded. Each app registers its warmers in its ``AppConfig.ready()``; the
server's start-up runs them without importing the apps."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

#: A warmer loads what the projects named (slugs; None: every project) will need.
Warmer = Callable[[Sequence[str] | None], object]

logger = logging.getLogger(__name__)

_warmers: list[Warmer] = []


def warmer_register(warmer: Warmer) -> None:
    """Called by an app when it is ready (once per warmer)."""
    if warmer not in _warmers:
        _warmers.append(warmer)


def warm(projects: Sequence[str] | None = None) -> None:
    """Runs every registered warmer for ``projects`` (slugs; None: every project), in the order
    the apps registered them."""
    for warmer in _warmers:
        warmer(projects)


def warm_in_background(projects: Sequence[str] | None = None) -> threading.Thread:
    """Starts ``warm(projects)`` in a thread of its own, so that a server's start-up goes on
    beside it (the load holds the interpreter's lock for long stretches, but reading and
    checking the snapshot file does not); a call that needs an index meanwhile waits for its
    load. A failure is logged and leaves each load to its first call. The thread closes its
    own database connections when it ends."""

    def run() -> None:
        from django.db import connections

        try:
            warm(projects)
        except Exception:
            logger.exception("compiler indexes not warmed; each loads on its first compile")
        finally:
            connections.close_all()  # this thread's

    thread = threading.Thread(target=run, name="warm", daemon=True)
    thread.start()
    return thread
