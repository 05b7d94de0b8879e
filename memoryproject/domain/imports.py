"""Modules a library imports for a feature the service never uses, kept off a server's start.

A library sometimes imports a module it can do without: DRF imports ``requests`` for its
``RequestsClient`` test client alone, and ``django.contrib.postgres`` for PostgreSQL-only model
fields; the MCP SDK builds a ``rich`` log handler that Django's logging then ignores. Refused
while that library loads, the module is not loaded for nothing (tens of milliseconds each), and
the library goes on as if it were not installed. Anything imported later loads as usual.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def imports_refused(*names: str) -> Iterator[None]:
    """Within the block, an import of any of ``names`` not loaded yet fails with ImportError,
    as if it were not installed. Afterwards each imports as usual. Process wide, as imports
    are: meant for a server's start-up, before it serves."""
    refused = [name for name in names if name not in sys.modules]
    for name in refused:
        sys.modules[name] = None  # type: ignore[assignment]  # an ImportError
    try:
        yield
    finally:
        for name in refused:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
