"""The snapshot of an index restored from a snapshot is written by a process of its own
(``manage.py compiler_snapshot``): the compile that makes it due answers without writing it,
and the next process restores the one that process wrote.

A new process is an empty in-memory cache: ``compiler_cache_clear`` leaves exactly that.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from graph_app.compiler import context_compile
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import (
    ProjectIndex,
    compiler_cache_clear,
    compiler_cache_forget,
    snapshot_now,
)
from graph_app.snapshot import snapshot_path
from graph_app.snapshot_writer import snapshot_in_background, writer_lock
from tests.compiler.helpers import stats_of

QUERY = "what does payment_service depend on"
WAIT_SECONDS = 120


def _facts(project, *values: str) -> None:
    for value in values:
        fact_upsert(
            project=project,
            subject_id="payment_service",
            predicate="depends_on",
            object_value=value,
        )


def _compile(project):
    return context_compile(project=project, query=QUERY, max_tokens=600)


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "snapshot-writer"]


@pytest.mark.django_db(transaction=True)
def test_a_restored_index_leaves_its_due_snapshot_to_a_process_of_its_own(
    settings, snapshots, default_project, capfd
):
    settings.COMPILER_SNAPSHOT_BACKGROUND = True
    _facts(default_project, "ledger_store", "auth_service")
    first = _compile(default_project)  # built from the rows: written here
    path = snapshot_path(default_project.pk)
    assert path is not None and path.exists()
    compiler_cache_clear()
    _compile(default_project)
    assert stats_of(default_project)["restored"] == first["revision"]
    written = path.stat().st_mtime_ns

    _facts(default_project, "billing_api")
    before = set(_writers())
    due = _compile(default_project)
    assert "billing_api" in due["markdown"]
    # Answered before the snapshot was rewritten: a process of its own is at it.
    assert path.stat().st_mtime_ns == written
    started = [t for t in _writers() if t not in before]
    assert len(started) == 1
    started[0].join(WAIT_SECONDS)
    assert not started[0].is_alive()

    err = capfd.readouterr().err
    found = re.search(
        r"snapshot of project default written at revision (\d+) in process (\d+)", err
    )
    assert found is not None, err
    assert int(found[1]) == due["revision"] and int(found[2]) != os.getpid()
    compiler_cache_clear()
    assert _compile(default_project)["markdown"] == due["markdown"]
    assert stats_of(default_project)["restored"] == due["revision"]
    assert stats_of(default_project)["rows_read"] == 0


def test_the_command_writes_a_snapshot_behind_and_then_finds_it_current(
    settings, snapshots, default_project
):
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 10_000  # nothing written by the compiles themselves
    _facts(default_project, "ledger_store")
    _compile(default_project)
    out = StringIO()
    call_command("compiler_snapshot", "--project", "default", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["ok"] is True
    [project] = report["projects"]
    assert project["project"] == "default" and project["status"] == "written"

    compiler_cache_clear()
    out = StringIO()
    call_command("compiler_snapshot", "--project", "default", stdout=out)
    assert re.search(r"^default\s+current\s", out.getvalue(), re.M), out.getvalue()
    assert "peak memory" in out.getvalue()


def test_a_snapshot_just_written_is_current_for_the_process_that_wrote_it(
    settings, snapshots, default_project
):
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 10_000
    _facts(default_project, "ledger_store")
    assert snapshot_now(default_project)["status"] == "written"
    assert snapshot_now(default_project)["status"] == "current"
    _facts(default_project, "auth_service")
    assert snapshot_now(default_project)["status"] == "written"


def test_a_write_landing_between_the_refresh_and_the_save_is_caught_up_with(
    settings, snapshots, default_project, monkeypatch
):
    """Under writes, another commit can land between the writer's refresh and its save (which
    then declines a revision it has not read): the writer catches up and saves again."""
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 10_000
    _facts(default_project, "ledger_store")
    save = ProjectIndex.save
    landed: list[int] = []

    def write_first(self, project):  # another client's commit, just before the first save
        if not landed:
            landed.append(1)
            _facts(project, "billing_api")
        return save(self, project)

    monkeypatch.setattr(ProjectIndex, "save", write_first)
    report = snapshot_now(default_project)
    assert landed and report["status"] == "written"
    compiler_cache_clear()
    monkeypatch.setattr(ProjectIndex, "save", save)
    assert "billing_api" in _compile(default_project)["markdown"]
    assert stats_of(default_project)["restored"] == report["revision"]
    assert stats_of(default_project)["rows_read"] == 0


def test_a_writer_finding_the_lock_held_leaves_the_work_to_its_holder(snapshots, default_project):
    _facts(default_project, "ledger_store")
    path = snapshot_path(default_project.pk)
    assert path is not None
    with writer_lock(path, wait=True) as had:
        assert had
        assert snapshot_now(default_project)["status"] == "busy"
    assert snapshot_now(default_project)["status"] == "written"


def test_the_command_names_an_unknown_project(snapshots, default_project):
    with pytest.raises(CommandError, match="--project: no project 'nope'"):
        call_command("compiler_snapshot", "--project", "nope")


def test_forgetting_a_snapshot_waits_for_the_writer_at_work(snapshots, default_project):
    """An erasure's forget deletes the snapshot only once the writer holding its lock is done,
    never a file that writer would then put back."""
    _facts(default_project, "ledger_store")
    _compile(default_project)
    path = snapshot_path(default_project.pk)
    assert path is not None and path.exists()
    held = threading.Event()
    done = threading.Event()

    def hold() -> None:
        with writer_lock(path, wait=True):
            held.set()
            time.sleep(0.3)
            done.set()  # before the lock is let go

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    compiler_cache_forget(default_project.pk)
    assert done.is_set() and not path.exists()
    holder.join()


def test_forgetting_a_snapshot_no_writer_wrote_leaves_no_lock_file(snapshots, default_project):
    _facts(default_project, "ledger_store")
    _compile(default_project)
    path = snapshot_path(default_project.pk)
    assert path is not None and path.exists()
    compiler_cache_forget(default_project.pk)
    assert list(snapshots.iterdir()) == []


def test_a_snapshot_fewer_than_min_rows_behind_is_left_as_it_is(
    settings, snapshots, default_project
):
    """A server's writer (``--min-rows``) rewrites a snapshot only once that many rows were
    written since it: another server's writer may have rewritten it for the same rows."""
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 10_000
    _facts(default_project, "ledger_store")
    assert snapshot_now(default_project)["status"] == "written"
    path = snapshot_path(default_project.pk)
    assert path is not None
    written = path.stat().st_mtime_ns
    _facts(default_project, "auth_service", "billing_api")

    compiler_cache_clear()  # a new process: restores the snapshot, reads the rows since
    report = snapshot_now(default_project, min_rows=1000)
    assert report["status"] == "recent" and report["snapshot"] >= 0
    rows = report["rows"]
    assert rows >= 2  # the two facts' rows, at least
    assert path.stat().st_mtime_ns == written
    compiler_cache_clear()
    out = StringIO()
    call_command("compiler_snapshot", "--min-rows", str(rows), "--json", stdout=out)
    [project] = json.loads(out.getvalue())["projects"]
    assert project["status"] == "written" and project["rows"] == rows
    assert path.stat().st_mtime_ns != written
    compiler_cache_clear()
    assert "billing_api" in _compile(default_project)["markdown"]
    assert stats_of(default_project)["rows_read"] == 0


@pytest.mark.django_db(transaction=True)
def test_servers_crossing_the_threshold_for_the_same_rows_share_one_rewrite(
    settings, snapshots, default_project
):
    settings.COMPILER_SNAPSHOT_BACKGROUND = True
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 3
    _facts(default_project, "ledger_store")
    assert snapshot_now(default_project)["status"] == "written"
    path = snapshot_path(default_project.pk)
    assert path is not None

    _facts(default_project, "auth_service", "billing_api", "search_api")
    compiler_cache_clear()  # server A: restores the snapshot, reads the rows since
    before = set(_writers())
    _compile(default_project)
    [writer] = [t for t in _writers() if t not in before]  # A crossed the threshold
    writer.join(WAIT_SECONDS)
    assert not writer.is_alive()
    rewritten = path.stat().st_mtime_ns

    # Server B restored the first snapshot too: it reads the same rows and one write's more,
    # and crosses the threshold in turn. The snapshot on disk is one write behind: left as it is.
    _facts(default_project, "queue_worker")
    process = snapshot_in_background(default_project.slug)
    assert process is not None and process.wait(WAIT_SECONDS) == 0
    assert path.stat().st_mtime_ns == rewritten
    compiler_cache_clear()
    assert "queue_worker" in _compile(default_project)["markdown"]
    assert 1 <= stats_of(default_project)["rows_read"] < 3


def test_the_command_refuses_a_negative_row_count(snapshots, default_project):
    with pytest.raises(CommandError, match="--min-rows: must be 0 or more, got -1"):
        call_command("compiler_snapshot", "--min-rows", "-1")
