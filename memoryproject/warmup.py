"""What a server process loads before its first request: gunicorn's master before it forks its
workers (``gunicorn_conf``), so each worker starts with it, shared copy-on-write; the MCP server
(``mcp_serve``) in the background as it starts, so the agent's first call finds it loaded. Each
app registers its warmers in its ``AppConfig.ready()``; the server's start-up runs them without
importing the apps."""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: A warmer loads what the projects named (slugs; None: every project) will need.
Warmer = Callable[[Sequence[str] | None], object]

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
