"""The REST framework's compatibility module, loaded without what the service never uses of it.

``rest_framework.compat`` imports ``django.contrib.postgres.fields`` when it can, to give
``ModelSerializer`` its mappings of PostgreSQL-only model fields, and that import loads
``psycopg`` (about 70 ms of a web server's start-up, more than any other framework module).
On SQLite no model field can be a PostgreSQL one and nothing uses the driver, so the web
application (``memoryproject.wsgi``) loads DRF's module with that one import refused, before
its URL map imports DRF's views: DRF then maps no PostgreSQL field, and a later import of
``django.contrib.postgres`` (or ``psycopg``, for a PostgreSQL witness store) loads it as usual.
On PostgreSQL the database's backend loads the driver anyway, and nothing changes.

It also imports ``requests`` when it can (installed here for detect-secrets), for the test
client ``rest_framework.test.RequestsClient`` alone, which the service does not use: that import
(with ``urllib3`` and ``charset_normalizer``, 35 to 55 ms of a start here) is refused too, on
any database, and DRF goes on as if ``requests`` were not installed. Loaded later, it loads as
usual; detect-secrets, which imports it with the secret rules, gets a stand-in that loads it only
if read (``memoryproject.domain.screening_providers``), and nothing reads it.

It imports ``markdown`` and ``pygments`` when they can be (installed beside the service by the
docs site's tools, not by a server install) to render view descriptions and code in the
browsable API, which the service does not serve (its only renderer is JSON): those imports
(30 to 40 ms of a start where they are installed) are refused too, and DRF goes on as it does
where they are not installed.

The schema generator's plumbing imports DRF's test client, and with it Django's test
utilities, which import ``jinja2`` when they can (installed beside the service by the docs
site's tools) for a decorator of template tests alone: that import (16 to 20 ms of the web
application's start here, 5 runs each way on 2026-12-05) is refused too while those utilities
load.
"""

from __future__ import annotations

import importlib
import sys

from django.db import connections

from memoryproject.domain.imports import imports_refused

POSTGRES_FIELDS = "django.contrib.postgres.fields"
#: Loaded by DRF only for its ``RequestsClient`` test client.
REQUESTS = "requests"
#: Loaded by DRF only for its browsable API (view descriptions and code shown in HTML).
BROWSABLE_ONLY = ("markdown", "pygments")
#: Loaded by Django's test utilities only for ``require_jinja2``, a decorator of template tests.
TEST_UTILITIES = "django.test.utils"
TEST_TEMPLATES_ONLY = "jinja2"


def drf_compat_load() -> None:
    """Imports ``rest_framework.compat`` without ``requests``, ``markdown`` or ``pygments``
    (each unless it is loaded already), on SQLite without ``django.contrib.postgres`` either;
    and Django's test utilities without ``jinja2``."""
    if TEST_UTILITIES not in sys.modules:
        with imports_refused(TEST_TEMPLATES_ONLY):
            importlib.import_module(TEST_UTILITIES)
    if "rest_framework.compat" in sys.modules:
        return
    refused = [REQUESTS, *BROWSABLE_ONLY]
    if connections["default"].vendor == "sqlite":
        refused.append(POSTGRES_FIELDS)
    with imports_refused(*refused):
        importlib.import_module("rest_framework.compat")
