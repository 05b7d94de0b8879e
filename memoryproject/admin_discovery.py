"""The admin's modules, discovered as a process starts or when the admin is first needed.

Django's admin imports every app's ``admin`` module as the process sets up (its
``autodiscover``), and with them the selectors and contracts the console's pages read: about a
fifth of the REST API server's start-up CPU (``memory_benchmark --first-compile``). An agent's
first compile or plan needs none of it. So the admin app is installed without that step
(``SimpleAdminConfig``) and it is taken here:

- as the apps get ready (``discover_at_start``), in every process but the MCP server, which
  serves no page, and the REST API server (``memoryproject.server``), which defers it;
- in a process that deferred it, when the admin is first needed: a browser page's request
  (``memoryproject.middleware.AdminDiscoveryMiddleware``: the console's pages list the admin's
  models too) or the first look-up of the URL map's admin part (``AdminURLs``: reversing any
  URL name reads the whole map), whichever comes first, once per process.

This module imports nothing of Django until it discovers: the server defers before Django sets
up.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any, overload

_state = {"deferred": False, "done": False}
_lock = threading.Lock()


def admin_discovery_defer() -> None:
    """Called by a server before Django sets up: the admin's modules are imported when the
    admin is first needed, not as the apps get ready."""
    _state["deferred"] = True


def admin_discover() -> None:
    """Imports every app's admin module, registering its models with the admin, once per
    process (later calls return at once)."""
    if _state["done"]:
        return
    with _lock:
        if not _state["done"]:
            from django.contrib import admin

            admin.autodiscover()
            _state["done"] = True


def discover_at_start() -> None:
    """As the apps get ready: discovers unless this process deferred it or is the MCP server."""
    from django.conf import settings

    if not (_state["deferred"] or settings.MCP_SERVER):
        admin_discover()


class AdminURLs(Sequence[Any]):
    """The admin site's URL patterns, made on first look-up, after discovery (the URL map is
    read once and kept: patterns made before discovery would lack every model's pages). Django's
    resolver reads ``urlpatterns``; read as a sequence, it is those patterns."""

    @cached_property
    def urlpatterns(self) -> list[Any]:
        from django.contrib import admin

        admin_discover()
        return admin.site.get_urls()

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self.urlpatterns[index]

    def __len__(self) -> int:
        return len(self.urlpatterns)


def admin_urls() -> tuple[AdminURLs, str, str]:
    """What ``path("admin/", ...)`` takes: the patterns, the app's name and the namespace, as
    ``admin.site.urls`` gives them, the patterns made on first look-up."""
    from django.contrib import admin

    return AdminURLs(), "admin", admin.site.name
