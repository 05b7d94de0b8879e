"""Modules a library imports for a feature the service never uses, kept off a server's start.

A library sometimes imports a module it can do without: DRF imports ``requests`` for its
``RequestsClient`` test client alone, and ``django.contrib.postgres`` for PostgreSQL-only model
fields; the MCP SDK builds a ``rich`` log handler that Django's logging then ignores. Refused
while that library loads, the module is not loaded for nothing (tens of milliseconds each), and
the library goes on as if it were not installed. Anything imported later loads as usual.

Where a library imports a module at its top for a feature the service never calls (detect-secrets
imports ``requests`` to verify a found token over the network), refusing it would fail the
library's import: such a module is deferred instead, its body run when something first reads
one of its attributes. (The standard library's ``importlib.util.LazyLoader`` cannot do this
here: before Python 3.12 the import statement itself, reading the module's spec, loads it.)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


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


class _Deferred(ModuleType):
    """Stands in ``sys.modules`` for a module not loaded yet. The import system reads only what
    it holds (its name and spec), so importing it again gives it back; reading any other
    attribute loads the module, which then replaces it, and answers from there."""

    def __getattr__(self, attribute: str) -> Any:
        return getattr(_deferred_load(self.__name__), attribute)


_deferred_lock = threading.Lock()


def _deferred_load(name: str) -> ModuleType:
    with _deferred_lock:
        module = sys.modules.get(name)
        if module is None or isinstance(module, _Deferred):
            sys.modules.pop(name, None)
            module = importlib.import_module(name)
        return module


@contextmanager
def imports_deferred(*names: str) -> Iterator[None]:
    """Within the block, an import of any of ``names`` (top-level modules) not loaded yet gives
    a stand-in that loads the module when one of its attributes is first read, by whichever
    code reads it, during the block or after. A name that is not installed is left to fail as
    usual."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        stand_in = _Deferred(name)
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in
    yield
