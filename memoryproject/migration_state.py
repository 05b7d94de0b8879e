"""Whether the database has every migration of the installed apps applied: a server checks it
before it serves (``mcp_serve`` refuses to start otherwise, ``/healthz`` reports it).

The quick answer compares the names of the migration files on disk (listed, not imported) with
the ones the database records as applied: when every one is applied, none is pending. Otherwise
(a migration not yet applied, a squashed one the database knows by the names it replaces, an
app whose migrations are no plain package) Django's migration planner, which imports every
migration and builds their graph, counts the pending ones.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from django.apps import apps
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder


def _migration_files() -> set[tuple[str, str]] | None:
    """(app label, migration name) of every migration file of the installed apps, as Django's
    loader finds them; None when an app's migrations cannot be listed so (the planner decides)."""
    found: set[tuple[str, str]] = set()
    for app in apps.get_app_configs():
        module_name, explicit = MigrationLoader.migrations_module(app.label)
        if module_name is None:
            continue
        try:
            module = import_module(module_name)
        except ModuleNotFoundError as exc:
            if not explicit and exc.name == module_name:
                continue  # an app without migrations
            return None
        path = getattr(module, "__path__", None)
        if path is None or getattr(module, "__file__", None) is None:
            continue  # a module or an empty directory: the loader finds no migration in it
        for info in pkgutil.iter_modules(path):
            if not info.ispkg and info.name[0] not in "_~":
                found.add((app.label, info.name))
    return found


def migrations_pending(connection: BaseDatabaseWrapper) -> int:
    """How many migrations the database has not applied (0: it is up to date)."""
    files = _migration_files()
    if files is not None and files <= MigrationRecorder(connection).applied_migrations().keys():
        return 0
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
