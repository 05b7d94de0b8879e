"""manage.py save_session and load_session: the session services for hooks and scripts.

load_session --format text is what a Claude Code SessionStart hook runs: it prints the
SESSION_CONTEXT block or nothing, and exits 0 either way."""

import io
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from audit_app.models import InjectionRecord
from memoryproject.timeutil import utcnow
from sessions_app.models import SessionSummary
from sessions_app.session_memory import SUMMARY_PREAMBLE
from tests.sessions_app.factories import (
    STRUCTURED_SUMMARY,
    ProjectFactory,
    SessionSummaryFactory,
    vague_summary,
)

pytestmark = pytest.mark.django_db


def run(name, *args):
    """(exit status, stdout, stderr) of a command, as a shell would see them."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(name, *args, stdout=out, stderr=err)
        status = 0
    except SystemExit as exc:
        status = int(exc.code or 0)
    return status, out.getvalue(), err.getvalue()


# ---- load_session ---------------------------------------------------------------------------


def test_text_prints_the_session_context_block_and_receipts_it_as_cli():
    saved = SessionSummaryFactory(project=ProjectFactory(slug="billing"))
    status, out, _ = run("load_session", "--project", "billing")
    assert status == 0
    header, _, rest = out.partition("\n")
    assert header.startswith(f"SESSION_CONTEXT: (trust={saved.trust_score:.2f}, saved ")
    assert rest == f"{SUMMARY_PREAMBLE}\n«{saved.summary}»\n"  # stdout ends it with a newline
    record = InjectionRecord.objects.get()
    assert (record.source, record.channel, record.client) == ("load", "cli", "load_session")
    assert record.trace_ids == [str(saved.trace.trace_id)]
    # The exact text delivered is the one receipted (stdout ends it with a newline).
    assert out in (record.system_prompt, record.system_prompt + "\n")


def test_text_prints_nothing_and_exits_0_when_the_summary_is_refused():
    SessionSummaryFactory(
        project=ProjectFactory(slug="billing"),
        summary=vague_summary(400),
        trust_score=0.2,
        risk=0.8,
        decision="ESCALATE",
    )
    status, out, err = run("load_session", "--project", "billing")
    assert (status, out) == (0, "")
    assert "below the threshold 0.4500" in err
    assert InjectionRecord.objects.count() == 0


def test_text_prints_nothing_and_exits_0_when_nothing_was_saved():
    ProjectFactory(slug="billing")
    assert run("load_session", "--project", "billing")[:2] == (0, "")
    # A project never written to has no memory yet: still an empty context, not an error.
    status, out, err = run("load_session", "--project", "brand-new")
    assert (status, out) == (0, "")
    assert "no project 'brand-new'" in err


def test_json_prints_the_whole_answer_as_rest_does(api, default_project):
    SessionSummaryFactory()
    status, out, _ = run("load_session", "--project", "default", "--format", "json")
    assert status == 0
    body = json.loads(out)
    rest = api.get("/v1/sessions/load").json()
    assert set(body) == set(rest)
    assert body["found"] is True and body["trace_id"] == rest["trace_id"]
    assert body["system_prompt"] == rest["system_prompt"]
    assert InjectionRecord.objects.get(pk=body["injection_id"]).channel == "cli"


def test_json_exits_1_with_the_rule_when_nothing_passes():
    ProjectFactory(slug="billing")
    status, out, _ = run("load_session", "--project", "billing", "--format", "json")
    assert status == 1
    assert json.loads(out)["rule"] == "none"

    SessionSummaryFactory(project=ProjectFactory(slug="billing"), trust_score=0.6, risk=0.4)
    args = ("--project", "billing", "--format", "json", "--threshold", "0.7")
    status, out, _ = run("load_session", *args)
    body = json.loads(out)
    assert (status, body["found"], body["rule"], body["threshold"]) == (1, False, "threshold", 0.7)


def test_max_age_days_is_passed_to_the_service():
    SessionSummaryFactory(
        project=ProjectFactory(slug="billing"), created_at=utcnow() - timedelta(days=15)
    )
    assert run("load_session", "--project", "billing")[1] == ""
    status, out, _ = run("load_session", "--project", "billing", "--max-age-days", "30")
    assert status == 0 and out.startswith("SESSION_CONTEXT:")


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--threshold", "1.5"), "threshold"),
        (("--max-age-days", "0"), "max_age_days"),
        (("--project", "Not A Slug"), "project"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(fmt, args, named):
    ProjectFactory(slug="billing")
    status, out, err = run("load_session", "--project", "billing", "--format", fmt, *args)
    assert (status, out) == (2, "")
    assert err.startswith(f"load_session: {named}:")


def test_the_hook_exits_0_even_when_the_database_is_not_migrated(tmp_path):
    """Run as Claude Code runs it: a process of its own, here against an empty database."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.sqlite3'}",
    }
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    done = subprocess.run(
        [sys.executable, manage, "load_session", "--project", "billing", "--format", "text"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert "load_session:" in done.stderr and "Traceback" not in done.stderr


# ---- save_session ---------------------------------------------------------------------------


def test_save_from_a_file_scores_and_stores_the_summary(tmp_path):
    ProjectFactory(slug="billing")
    path = tmp_path / "summary.md"
    path.write_text(STRUCTURED_SUMMARY, encoding="utf-8")
    status, out, _ = run("save_session", "--project", "billing", "--file", str(path))
    assert status == 0
    saved = SessionSummary.objects.get(project__slug="billing")
    assert saved.summary == STRUCTURED_SUMMARY.strip()
    assert f"trace {saved.trace.trace_id}" in out
    assert "PASS" in out and "missing     nothing" in out
    # What was saved is what the hook loads next.
    assert run("load_session", "--project", "billing")[1].rstrip("\n").endswith(f"{saved.summary}»")


def test_save_from_stdin_with_json_answers_as_rest_does(api, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(STRUCTURED_SUMMARY))
    status, out, _ = run("save_session", "--project", "default", "-", "--json")
    assert status == 0
    body = json.loads(out)
    rest = api.post("/v1/sessions/save", {"summary": STRUCTURED_SUMMARY}, format="json").json()
    assert set(body) == set(rest)
    assert body["decision"] == "PASS" and body["project"] == "default"
    assert SessionSummary.objects.filter(trace__trace_id=body["trace_id"]).exists()


def test_save_names_what_a_weak_summary_misses(monkeypatch):
    ProjectFactory(slug="billing")
    monkeypatch.setattr(sys, "stdin", io.StringIO(vague_summary(300)))
    status, out, _ = run("save_session", "--project", "billing", "-")
    assert status == 0
    assert "ESCALATE" in out and "key_files" in out.split("missing", 1)[1]


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (("--file", "/no/such/summary.md"), "", "save_session: --file: no such file"),
        (("-",), "  \n", "save_session: summary: must not be empty"),
        (("-",), "x" * 20_001, "save_session: summary: must be at most 20000 characters"),
    ],
)
def test_save_refuses_bad_input_with_exit_2(monkeypatch, args, stdin, message):
    ProjectFactory(slug="billing")
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    status, out, err = run("save_session", "--project", "billing", *args)
    assert (status, out) == (2, "")
    assert err.startswith(message)
    assert SessionSummary.objects.count() == 0


def test_save_to_a_project_that_does_not_exist_says_how_to_create_it(monkeypatch):
    from memoryproject.models import Project

    monkeypatch.setattr(sys, "stdin", io.StringIO(STRUCTURED_SUMMARY))
    status, out, err = run("save_session", "--project", "typo-project", "-")
    assert (status, out) == (2, "")
    assert "no project 'typo-project'" in err and "create_project typo-project" in err
    assert not Project.objects.filter(slug="typo-project").exists()
