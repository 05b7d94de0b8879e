"""backup_db: a consistent copy of the SQLite database taken while clients write, which a
restored server verifies whole; refusals name the argument and write nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection

from graph_app.fact_writes import fact_upsert
from orchestration.backup import database_backup
from sessions_app.plan import plan_context
from sessions_app.trace_writes import trace_record
from tests.background import committed_project, in_background
from tests.core.test_export_import import run as run_command

ROOT = Path(__file__).resolve().parents[2]

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="backup_db copies a SQLite file"
)


def run(*args: str) -> tuple[int, str, str]:
    return run_command("backup_db", *args)


@pytest.fixture
def committed():
    """A project whose writes really commit (the writer thread and the backup see them)."""
    with committed_project("backed-up") as project:
        yield project


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_backup_taken_while_a_client_writes_holds_every_write_acknowledged_before_it(
    committed, tmp_path
):
    acknowledged: list[str] = []
    stop, enough = threading.Event(), threading.Event()

    def writer() -> None:
        while not stop.is_set():
            trace = trace_record(project=committed, model="m", active_project="x")
            acknowledged.append(trace["trace_id"].replace("-", ""))
            if len(acknowledged) >= 30:
                enough.set()

    thread, errors = in_background(writer)
    try:
        assert enough.wait(30)
        before = list(acknowledged)
        result = database_backup(out=tmp_path / "copy.sqlite3")
        during = len(acknowledged)
    finally:
        stop.set()
        thread.join(30)
    assert errors == []
    assert result.integrity_check == "ok"
    copy = sqlite3.connect(tmp_path / "copy.sqlite3")
    held = {row[0] for row in copy.execute("SELECT trace_id FROM sessions_app_trace")}
    copy.close()
    assert set(before) <= held, "a write acknowledged before the backup began is missing"
    # Nothing from after it ended (one more: a commit whose acknowledgement was not yet listed).
    assert len(held & set(acknowledged)) <= during + 1
    assert not list(tmp_path.glob(".*.partial")), "the temporary copy was left behind"


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_restored_copy_verifies_whole_in_a_fresh_server(committed, tmp_path):
    """The restore drill: a server started on the copy verifies the injection log and the
    graph, and holds what the backup reported."""
    trace_record(project=committed, model="m", active_project="billing")
    plan_context(project=committed, trust_threshold=0.0)
    fact_upsert(project=committed, subject_id="auth", predicate="uses", object_value="JWT")
    fact_upsert(project=committed, subject_id="auth", predicate="uses", object_value="PASETO")
    out = tmp_path / "memory.sqlite3"
    code, stdout, err = run("--out", str(out), "--json")
    assert code == 0, stdout + err
    report = json.loads(stdout)
    assert report["ok"] is True and report["receipts"] >= 1
    assert report["graph_revisions"]["backed-up"] == 2
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "DATABASE_URL": f"sqlite:///{out}",
        "DEBUG": "1",
    }
    env.pop("MEMORY_TEST_DB_SUFFIX", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    log = subprocess.run(
        [*manage, "injection_log_verify", "--json"], env=env, cwd=ROOT, capture_output=True
    )
    assert log.returncode == 0, log.stdout + log.stderr
    verified = json.loads(log.stdout)
    assert verified["ok"] is True and verified["checked"] == report["receipts"]
    script = (
        "import json; from graph_app.integrity import integrity_verify; "
        "from memoryproject.models import Project; "
        "r = integrity_verify(project=Project.objects.get(slug='backed-up')); "
        "print(json.dumps({'verified': r['verified']}))"
    )
    graph_check = subprocess.run(
        [*manage, "shell", "-c", script], env=env, cwd=ROOT, capture_output=True
    )
    assert graph_check.returncode == 0, graph_check.stderr
    assert json.loads(graph_check.stdout.splitlines()[-1]) == {"verified": True}


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_refusals_name_the_argument_and_write_nothing(tmp_path):
    existing = tmp_path / "taken.sqlite3"
    existing.write_bytes(b"an older backup")
    code, stdout, _ = run("--out", str(existing), "--json")
    assert code == 2 and "--out" in json.loads(stdout)["error"] and "--force" in stdout
    assert existing.read_bytes() == b"an older backup"
    code, _, err = run("--out", str(connection.settings_dict["NAME"]), "--force")
    assert code == 2 and "must not be the database itself" in err
    code, _, err = run("--out", str(tmp_path / "missing" / "copy.sqlite3"))
    assert code == 2 and "does not exist" in err
    code, stdout, _ = run("--out", str(existing), "--force")
    assert code == 0 and "integrity check  ok" in stdout
    assert existing.read_bytes()[:16] == b"SQLite format 3\x00"


@sqlite_only
@pytest.mark.django_db
def test_a_backup_inside_a_transaction_is_refused(tmp_path):
    """Inside a transaction (this test's) the snapshot could never be taken: refused at once."""
    code, stdout, _ = run("--out", str(tmp_path / "copy.sqlite3"), "--json")
    assert code == 2 and "outside any transaction" in json.loads(stdout)["error"]
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the PostgreSQL refusal")
@pytest.mark.django_db
def test_postgresql_is_refused_with_how_to_back_it_up(tmp_path):
    code, stdout, _ = run("--out", str(tmp_path / "copy.sqlite3"), "--json")
    assert code == 2 and "pg_dump" in json.loads(stdout)["error"]
    assert not list(tmp_path.iterdir())
