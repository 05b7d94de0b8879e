"""Whether the database has every migration applied (memoryproject.migration_state): answered
from the files' names when all are applied, by Django's planner otherwise."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from memoryproject import migration_state
from memoryproject.migration_state import migrations_pending

pytestmark = pytest.mark.django_db


def _planner_count() -> int:
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def test_an_up_to_date_database_is_answered_without_the_planner(monkeypatch):
    assert _planner_count() == 0
    monkeypatch.setattr(migration_state, "MigrationExecutor", None)  # any use would fail
    assert migrations_pending(connection) == 0


def test_the_files_listed_are_the_migrations_the_planner_knows():
    executor = MigrationExecutor(connection)
    assert migration_state._migration_files() == set(executor.loader.disk_migrations)


@pytest.mark.parametrize(
    ("app", "name"), [("graph_app", "0004_change_log"), ("audit_app", "0009_witnessed_gate")]
)
def test_a_migration_not_applied_is_counted_by_the_planner(app, name):
    MigrationRecorder(connection).record_unapplied(app, name)
    assert migrations_pending(connection) == _planner_count() == 1


def test_an_unmigrated_database_counts_every_migration():
    recorder = MigrationRecorder(connection)
    applied = list(recorder.applied_migrations())
    for app, name in applied:
        recorder.record_unapplied(app, name)
    assert migrations_pending(connection) == len(applied) > 0
