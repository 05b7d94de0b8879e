"""The REST framework's compatibility module, loaded without the PostgreSQL driver on SQLite.

``rest_framework.compat`` imports ``django.contrib.postgres.fields`` when it can, to give
``ModelSerializer`` its mappings of PostgreSQL-only model fields, and that import loads
``psycopg`` (about 70 ms of a web server's start-up, more than any other framework module).
On SQLite no model field can be a PostgreSQL one and nothing uses the driver, so the web
application (``memoryproject.wsgi``) loads DRF's module with that one import refused, before
its URL map imports DRF's views: DRF then maps no PostgreSQL field, and a later import of
``django.contrib.postgres`` (or ``psycopg``, for a PostgreSQL witness store) loads it as usual.
On PostgreSQL the database's backend loads the driver anyway, and nothing changes.
"""

from __future__ import annotations

import importlib
import sys

from django.db import connections

POSTGRES_FIELDS = "django.contrib.postgres.fields"


def drf_compat_load() -> None:
    """Imports ``rest_framework.compat``, on SQLite without ``django.contrib.postgres``."""
    if "rest_framework.compat" in sys.modules or POSTGRES_FIELDS in sys.modules:
        return
    if connections["default"].vendor != "sqlite":
        importlib.import_module("rest_framework.compat")
        return
    sys.modules[POSTGRES_FIELDS] = None  # type: ignore[assignment]  # an ImportError
    try:
        importlib.import_module("rest_framework.compat")
    finally:
        if sys.modules.get(POSTGRES_FIELDS, "") is None:
            del sys.modules[POSTGRES_FIELDS]
