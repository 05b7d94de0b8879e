"""Every write of the service takes its turn among the writers of a SQLite file
(``memoryproject.writes.write_transaction``), not only plans and deliveries: a trace or a fact
that went straight to SQLite's write lock would poll behind the queue and could time out under
load. Another process holding the turn (``<database>-writer``; a second open file is a second
holder to flock, as another process's would be) makes each write wait, and it goes through as
soon as the turn is released."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from audit_app.erasure import erase
from audit_app.findings import contradictions_audit
from audit_app.models import AuditRun
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.models import Episode, TemporalFact
from memoryproject.contracts import Caller
from memoryproject.models import Project, ProjectAPIKey
from memoryproject.services import api_key_create
from memoryproject.writes import write_transaction
from orchestration.portability import project_export, project_import
from sessions_app.models import SessionSummary, Trace
from sessions_app.session_memory import session_save
from sessions_app.trace_writes import trace_record
from tests.background import committed_project, in_background

pytestmark = [
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's writer lock file"),
    pytest.mark.django_db(transaction=True),
]

SUMMARY = (
    "## Decisions\n- retry webhooks with backoff\n## Open questions\n- which queue?\n"
    "## Key files\n- billing/webhooks.py"
)


@pytest.fixture
def committed():
    """A project whose writes really commit, so the writing thread and the test see them."""
    with committed_project("turns") as project:
        yield project


def _trace(project: Project) -> Callable[[], bool]:
    trace_record(project=project, model="m", active_project="billing")
    return lambda: Trace.objects.filter(project=project).exists()


def _summary(project: Project) -> Callable[[], bool]:
    session_save(project=project, summary=SUMMARY)
    return lambda: SessionSummary.objects.filter(project=project).exists()


def _fact(project: Project) -> Callable[[], bool]:
    fact_upsert(project=project, subject_id="auth", predicate="uses", object_value="JWT")
    return lambda: TemporalFact.objects.filter(project=project).exists()


def _episode(project: Project) -> Callable[[], bool]:
    episode_record(project=project, title="Use JWT", category="adr", content="why")
    return lambda: Episode.objects.filter(project=project).exists()


def _audit(project: Project) -> Callable[[], bool]:
    contradictions_audit(project=project, caller=Caller(channel="test", client="turns"))
    return lambda: AuditRun.objects.filter(project=project).exists()


def _key(project: Project) -> Callable[[], bool]:
    api_key_create(name="turns", project_slugs=[project.slug], scope="write")
    return lambda: ProjectAPIKey.objects.filter(name="turns").exists()


def _erasure(project: Project) -> Callable[[], bool]:
    trace = trace_record(project=project, model="secret-model", active_project="secret")
    return lambda: (
        bool(erase(target="trace", ref=trace["trace_id"], reason="asked", by="dpo"))
        and (
            Trace.objects.get(project=project, trace_id=trace["trace_id"]).metadata
            == {"erased": True}
        )
    )


def _import(project: Project, tmp_path: Path) -> Callable[[], bool]:
    source = Project.objects.create(slug="turns-moved", name="moved")
    trace_record(project=source, model="m", active_project="billing")
    out = tmp_path / "turns.jsonl"
    project_export(slug=source.slug, out=out)
    source.delete()  # moved out: the import brings it back
    return lambda: (
        project_import(path=out).project == "turns-moved"
        and (Trace.objects.filter(project__slug="turns-moved").count() == 1)
    )


# Each: prepares (outside the held turn) and answers the write to run while the turn is held,
# or, for those that are the write themselves, None with a check that it landed.
PREPARED = {"erasure": _erasure, "import": _import}
DIRECT = {
    "trace": _trace,
    "session summary": _summary,
    "fact": _fact,
    "episode": _episode,
    "contradiction audit": _audit,
    "api key": _key,
}


def _held_turn() -> int:
    path = f"{connection.settings_dict['NAME']}-writer"
    other = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    return other


def _run_while_held(write: Callable[[], Any]) -> tuple[threading.Thread, threading.Event, list]:
    done = threading.Event()

    def run() -> None:
        if write() is not False:
            done.set()

    thread, errors = in_background(run)
    return thread, done, errors


@pytest.mark.parametrize("door", sorted(DIRECT))
def test_a_write_waits_for_its_turn_and_then_goes_through(committed, door):
    landed: list[Callable[[], bool]] = []
    other = _held_turn()
    try:
        thread, done, errors = _run_while_held(lambda: landed.append(DIRECT[door](committed)))
        assert not done.wait(0.5), f"the {door} was written while another process held the turn"
        assert errors == []
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    thread.join(10)
    assert errors == [] and done.is_set()
    assert landed and landed[0](), f"the {door} did not land once its turn came"


@pytest.mark.parametrize("door", sorted(PREPARED))
def test_an_erasure_or_import_waits_for_its_turn(committed, door, tmp_path):
    write = PREPARED[door](committed, tmp_path) if door == "import" else PREPARED[door](committed)
    other = _held_turn()
    try:
        thread, done, errors = _run_while_held(write)
        assert not done.wait(0.5), f"the {door} was written while another process held the turn"
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    thread.join(10)
    assert errors == [] and done.is_set()


def test_an_export_reads_while_a_writer_holds_the_database(committed, tmp_path):
    """An export reads its tables in one snapshot that writers do not wait for, and that does
    not wait for them: it used to open an IMMEDIATE transaction, which waits for the database's
    write lock (and then holds it for as long as the export takes)."""
    fact_upsert(project=committed, subject_id="auth", predicate="uses", object_value="JWT")
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with write_transaction():
            fact_upsert(
                project=committed, subject_id="billing", predicate="uses", object_value="Kafka"
            )
            holding.set()
            release.wait(30)

    thread, errors = in_background(writer)
    try:
        assert holding.wait(10)
        exported = threading.Event()
        out = tmp_path / "during.jsonl"
        reader = threading.Thread(
            target=lambda: (project_export(slug=committed.slug, out=out), exported.set())
        )
        reader.start()
        assert exported.wait(5), "the export waited for a writer's transaction"
        reader.join(5)
    finally:
        release.set()
        thread.join(10)
    assert errors == []
    # The state before the writer's commit: one fact, its change log, nothing half seen.
    header = json.loads(out.read_text().splitlines()[0])
    assert header["counts"]["fact"] == 1
    after = project_export(slug=committed.slug, out=tmp_path / "after.jsonl")["counts"]
    assert after["fact"] == 2 and after["graph_change"] > header["counts"]["graph_change"]


def test_a_receipt_is_witnessed_after_the_turn_passes_and_before_the_plan_answers(
    committed, monkeypatch
):
    """Witnessing the log's new head follows the commit but needs no place in the queue: while
    one plan's head is being witnessed, the next writer already writes. The plan still answers
    only once its head is witnessed (and a head only moves forward, whichever lands first)."""
    import audit_app.injection_log as injection_log
    from audit_app.models import InjectionRecord
    from sessions_app.plan import plan_context

    trace_record(project=committed, model="m", active_project="billing")
    witnessed: list[int] = []
    other_wrote = threading.Event()

    def witness_slowly(stream: str, seq: int, digest: str, **details: Any) -> None:
        # The next writer must get its turn while this plan's head is being witnessed.
        writer, errors = in_background(
            lambda: trace_record(project=committed, model="next", active_project="billing")
        )
        writer.join(10)
        assert errors == []
        if Trace.objects.filter(project=committed, model="next").exists():
            other_wrote.set()
        witnessed.append(seq)

    monkeypatch.setattr(injection_log, "witness_head_advance", witness_slowly)
    answer = plan_context(project=committed, channel="rest", client="turns", mode="force")
    assert other_wrote.is_set(), "the next writer waited for the witness (still in the turn)"
    # Witnessed before the plan answered: its receipt's place in the chain, once.
    assert witnessed == [InjectionRecord.objects.get(pk=answer.injection_id).seq]


def test_work_after_the_turn_runs_only_after_a_commit():
    """What ``after_turn`` registers runs once the transaction committed, with the turn free;
    a rolled-back transaction runs nothing."""
    from memoryproject.writes import after_turn

    path = f"{connection.settings_dict['NAME']}-writer"
    seen: list[bool] = []

    def turn_free() -> None:
        other = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a writer holds it
            fcntl.flock(other, fcntl.LOCK_UN)
            seen.append(True)
        finally:
            os.close(other)

    with write_transaction():
        Project.objects.create(slug="after-turn", name="after")
        after_turn(turn_free)
        assert seen == []
    assert seen == [True]

    with pytest.raises(RuntimeError), write_transaction():
        Project.objects.create(slug="after-turn-2", name="rolled back")
        after_turn(turn_free)
        raise RuntimeError("rolled back")
    assert seen == [True] and not Project.objects.filter(slug="after-turn-2").exists()


def _synchronous() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        return int(cursor.fetchone()[0])


def test_a_write_flushes_the_log_after_its_turn_and_before_it_returns(monkeypatch):
    """A transaction that takes the turn commits at NORMAL (its frames written, not flushed),
    passes the turn on, and flushes the write-ahead log itself before the write returns; work
    registered for after the turn runs once the log is on disk. Writes outside a turn stay at
    FULL, SQLite's own flush inside the commit."""
    import memoryproject.writes as writes
    from memoryproject.writes import after_turn

    database = str(connection.settings_dict["NAME"])
    wal = Path(f"{database}-wal").resolve()
    events: list[str] = []
    real_fdatasync = os.fdatasync

    def fdatasync(descriptor: int) -> None:
        flushed = Path(os.readlink(f"/proc/self/fd/{descriptor}")).resolve()
        events.append("flush " + ("log" if flushed == wal else str(flushed)))
        events.append("turn held" if writes._TURN.locked() else "turn free")
        real_fdatasync(descriptor)

    monkeypatch.setattr(writes.os, "fdatasync", fdatasync)
    assert _synchronous() == 2  # FULL, outside a turn
    with write_transaction():
        assert _synchronous() == 1  # NORMAL: the flush comes after the turn
        Project.objects.create(slug="flushed", name="flushed")
        after_turn(lambda: events.append("after turn"))
        assert events == []
    assert events == ["flush log", "turn free", "after turn"]
    assert _synchronous() == 2
    # Another connection reads the commit.
    seen: list[bool] = []
    reader, errors = in_background(
        lambda: seen.append(Project.objects.filter(slug="flushed").exists())
    )
    reader.join(10)
    assert (seen, errors) == ([True], [])

    events.clear()
    with pytest.raises(RuntimeError), write_transaction():
        Project.objects.create(slug="not-flushed", name="rolled back")
        raise RuntimeError("rolled back")
    assert events == []  # nothing committed, nothing to flush
    assert _synchronous() == 2
    assert not Project.objects.filter(slug="not-flushed").exists()


def test_a_log_checkpointed_away_needs_no_flush(tmp_path):
    """With no log beside the database (a checkpoint moved it into the database file, flushed,
    and removed it), there is nothing to flush and nothing fails."""
    from memoryproject.writes import wal_flush

    database = tmp_path / "gone.sqlite3"
    wal_flush(str(database))  # no database, no log: nothing to do
    log = tmp_path / "kept.sqlite3-wal"
    log.write_bytes(b"frames")
    wal_flush(str(tmp_path / "kept.sqlite3"))
    assert log.read_bytes() == b"frames"


def test_a_write_that_cannot_set_its_sync_level_still_passes_the_turn_on(monkeypatch):
    """A connection that fails before its transaction opens (here: setting the sync level)
    fails that write only: the turn among processes and among threads is free again."""
    import memoryproject.writes as writes

    def refuse(connection: Any, level: str) -> None:
        if level == "NORMAL":
            raise OSError("disk I/O error")

    monkeypatch.setattr(writes, "_synchronous", refuse)
    with pytest.raises(OSError), write_transaction():
        Project.objects.create(slug="never", name="never written")
    assert not Project.objects.filter(slug="never").exists()
    other = os.open(f"{connection.settings_dict['NAME']}-writer", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the turn were still held
        fcntl.flock(other, fcntl.LOCK_UN)
    finally:
        os.close(other)
    assert not writes._TURN.locked()
