"""export_memory / import_memory: a project round-trips into an empty database with every id,
time, hash and link kept, and both verifications pass there."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from audit_app.models import InjectionRecord
from audit_app.selectors import injection_log_verify
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.integrity import integrity_verify
from graph_app.models import Entity, Episode, GraphChange, GraphRevision, TemporalFact
from memoryproject.models import Project
from sessions_app.models import SessionSummary, Trace
from sessions_app.plan import plan_context
from sessions_app.session_memory import session_load, session_save
from sessions_app.trace_writes import trace_record

pytestmark = pytest.mark.django_db

SUMMARY = (
    "Active project: billing-service (repo acme/billing)\n"
    "Last decision: retry failed webhooks with exponential backoff, max 5 attempts\n"
    "Current output: retry queue in billing/webhooks.py, 12 tests passing\n"
    "Open questions: should retries survive a deploy?\n"
    "Key files: billing/webhooks.py, billing/tests/test_webhooks.py"
)


def run(name, *args):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(name, *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def seed(slug: str = "billing") -> Project:
    project = Project.objects.create(slug=slug, name="Billing")
    episode = episode_record(
        project=project,
        category="adr",
        title="Move tokens to PASETO v4",
        content="HS256 secrets were shared across services.",
        files_touched=["src/auth/tokens.py"],
        entities_mentioned=["auth_service"],
        occurred_at="2026-04-20T09:00:00Z",
        external_id="ADR-12",
    )
    fact_upsert(
        project=project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="JWT_HS256",
        valid_from="2026-01-10T00:00:00Z",
    )
    fact_upsert(
        project=project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        valid_from="2026-04-20T00:00:00Z",
        source_episode=episode["id"],
    )
    fact_upsert(
        project=project,
        subject_id="order_repository",
        predicate="depends_on",
        object_entity="payment_ledger",
        singular=False,
    )
    trace_record(
        project=project,
        model="m",
        active_project="billing",
        last_decision="retry webhooks",
        current_output="billing/webhooks.py",
    )
    session_save(project=project, summary=SUMMARY)
    plan_context(project=project, mode="force")
    session_load(project=project, threshold=0.1)
    return project


def snapshot(project: Project) -> dict[str, list]:
    """Every row of the project, as values (ids, times, hashes and links included)."""
    return {
        "entity": list(Entity.objects.filter(project=project).order_by("id").values()),
        "episode": list(Episode.objects.filter(project=project).order_by("id").values()),
        "episode_entities": list(
            Episode.entities.through.objects.filter(episode__project=project)
            .order_by("id")
            .values("id", "episode_id", "entity_id")
        ),
        "fact": list(TemporalFact.objects.filter(project=project).order_by("id").values()),
        "change": list(GraphChange.objects.filter(project=project).order_by("seq").values()),
        "revision": list(
            GraphRevision.objects.filter(project=project).values("revision", "changes", "head_hash")
        ),
        "trace": list(Trace.objects.filter(project=project).order_by("id").values()),
        "summary": list(SessionSummary.objects.filter(project=project).order_by("id").values()),
        "receipt": list(InjectionRecord.objects.filter(project=project).order_by("seq").values()),
        "prompts": [r.system_prompt for r in InjectionRecord.objects.order_by("seq")],
    }


def empty_database() -> None:
    """What a new database holds: nothing but the migration's rows (the suite's flush opens the
    append-only gate). PostgreSQL truncates only once the test's pending foreign-key checks
    have run."""
    postgres = connection.vendor == "postgresql"
    if postgres:
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    call_command("flush", interactive=False, verbosity=0)
    if postgres:
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def test_round_trip_into_an_empty_database_keeps_everything_and_verifies(tmp_path):
    project = seed()
    before = snapshot(project)
    out = tmp_path / "billing.jsonl"
    code, stdout, _ = run("export_memory", "--project", "billing", "--out", str(out), "--json")
    assert code == 0
    header = json.loads(out.read_text().splitlines()[0])
    assert header["version"] == 1 and header["counts"]["fact"] == 3
    assert header["counts"]["receipt"] == 2 and json.loads(stdout)["ok"] is True

    empty_database()
    assert not Project.objects.filter(slug="billing").exists()
    code, stdout, err = run("import_memory", str(out), "--json")
    assert code == 0, stdout + err
    answer = json.loads(stdout)
    assert answer["ok"] is True and answer["receipts"] == "imported"
    imported = Project.objects.get(slug="billing")
    assert imported.pk == project.pk
    assert snapshot(imported) == before
    assert integrity_verify(project=imported)["verified"] is True
    assert injection_log_verify().ok is True
    # The imported project goes on working: a new write extends its chains.
    fact_upsert(
        project=imported, subject_id="auth_service", predicate="owner", object_value="platform"
    )
    plan_context(project=imported, mode="force")
    assert integrity_verify(project=imported)["verified"] is True
    assert injection_log_verify().ok is True


def test_receipts_into_a_log_that_is_not_empty_are_refused_clearly(tmp_path):
    seed()
    out = tmp_path / "billing.jsonl"
    assert run("export_memory", "--project", "billing", "--out", str(out))[0] == 0
    empty_database()
    other = Project.objects.create(slug="other")
    plan_context(project=other, mode="force")  # a receipt of another project
    code, _, err = run("import_memory", str(out))
    assert code == 2 and "receipts:" in err and "not empty" in err
    assert not Trace.objects.filter(project__slug="billing").exists()  # nothing written

    code, stdout, err = run("import_memory", str(out), "--skip-receipts", "--json")
    assert code == 0, stdout + err
    answer = json.loads(stdout)
    assert answer["receipts"] == "skipped" and answer["counts"]["fact"] == 3
    assert integrity_verify(project=Project.objects.get(slug="billing"))["verified"] is True
    assert injection_log_verify().ok is True


def test_renaming_a_sealed_graph_is_refused_and_sessions_rename(tmp_path):
    seed()
    out = tmp_path / "billing.jsonl"
    run("export_memory", "--project", "billing", "--out", str(out))
    empty_database()
    code, _, err = run("import_memory", str(out), "--project", "payments")
    assert code == 2 and "sealed" in err and "--project" in err

    plain = Project.objects.create(slug="notes")
    trace_record(
        project=plain, model="m", active_project="a", last_decision="b", current_output="c"
    )
    out2 = tmp_path / "notes.jsonl"
    run("export_memory", "--project", "notes", "--out", str(out2))
    empty_database()
    code, stdout, _ = run("import_memory", str(out2), "--project", "notes-2", "--json")
    assert code == 0 and json.loads(stdout)["project"] == "notes-2"
    assert Trace.objects.filter(project__slug="notes-2").count() == 1


def test_a_tampered_or_unknown_file_is_refused_with_exit_2(tmp_path):
    seed()
    out = tmp_path / "billing.jsonl"
    run("export_memory", "--project", "billing", "--out", str(out))
    lines = out.read_text().splitlines(keepends=True)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text(lines[0] + "".join(lines[1:]).replace("JWT_HS256", "JWT_RS256"))
    empty_database()
    code, _, err = run("import_memory", str(tampered))
    assert code == 2 and "body_sha256" in err
    code, _, err = run("import_memory", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "FILE" in err
    code, stdout, _ = run("export_memory", "--project", "nope", "--out", str(out), "--json")
    assert code == 2 and "--project" in json.loads(stdout)["error"]


def test_a_project_already_holding_data_is_refused(tmp_path):
    seed()
    out = tmp_path / "billing.jsonl"
    run("export_memory", "--project", "billing", "--out", str(out))
    code, _, err = run("import_memory", str(out), "--skip-receipts")
    assert code == 2 and "already holds data" in err


@pytest.mark.postgres_only
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="the SQLite -> PostgreSQL round trip imports into PostgreSQL (set DATABASE_URL)",
)
def test_sqlite_export_imports_into_postgresql(tmp_path):
    """A project exported from a SQLite database (a separate process) imports here."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'source.sqlite3'}", "DEBUG": "1"}
    env.pop("MEMORY_TEST_DB_SUFFIX", None)
    manage = [sys.executable, str(root / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, cwd=root)
    script = "from tests.core.test_export_import import seed; seed()"
    subprocess.run([*manage, "shell", "-c", script], env=env, check=True, cwd=root)
    out = tmp_path / "billing.jsonl"
    subprocess.run(
        [*manage, "export_memory", "--project", "billing", "--out", str(out)],
        env=env,
        check=True,
        cwd=root,
    )
    empty_database()
    code, stdout, err = run("import_memory", str(out), "--json")
    assert code == 0, stdout + err
    assert json.loads(stdout)["ok"] is True
    project = Project.objects.get(slug="billing")
    assert TemporalFact.objects.filter(project=project).count() == 3
    assert integrity_verify(project=project)["verified"] is True
    assert injection_log_verify().ok is True
