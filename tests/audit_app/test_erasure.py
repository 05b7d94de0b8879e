"""Erasure: the content is gone from every table and from the compiler, every chain and
integrity check still verifies, and the certificate lists the erased hashes."""

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection

from audit_app.models import InjectionRecord
from audit_app.selectors import injection_log_verify
from graph_app import integrity
from graph_app.compiler import context_compile
from graph_app.episode_writes import episode_record
from graph_app.index_cache import compiler_cache_clear
from sessions_app.plan import plan_context
from sessions_app.trace_writes import trace_record

pytestmark = pytest.mark.django_db

# Secrets are masked on write (see tests/security/test_screening_writes.py), so what erasure has
# to remove is personal data that screening lets through.
PERSONAL = "jane.roe@example.org"


@pytest.fixture(autouse=True)
def _fresh_compiler_cache():
    compiler_cache_clear()
    yield
    compiler_cache_clear()


def every_table_text() -> str:
    """Every text and JSON column of every table, as one string (what a database dump shows)."""
    dump = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            dump += [repr(row) for row in cursor.fetchall()]
    return "\n".join(dump)


def run_erase(*args):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("erase", *args, stdout=out, stderr=err)
        return 0, out.getvalue(), err.getvalue()
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()


def test_erasing_a_trace_removes_personal_data_everywhere(default_project):
    trace = trace_record(
        project=default_project,
        model="m",
        active_project="billing",
        last_decision=f"refund approved for {PERSONAL}",
        current_output="deploy.sh",
    )
    plan = plan_context(project=default_project, mode="force")
    assert PERSONAL in plan["system_prompt"] and PERSONAL in every_table_text()

    code, out, _ = run_erase(
        "--trace", trace["trace_id"], "--reason", "data subject request", "--json"
    )
    assert code == 0
    certificate = json.loads(out)
    assert PERSONAL not in every_table_text()
    [erased] = certificate["erased"]
    assert erased["kind"] == "trace" and len(erased["sha256"]) == 64
    receipt = InjectionRecord.objects.get(pk=plan["injection_id"])
    assert certificate["receipts"] == [receipt.seq]
    assert certificate["texts_erased"] == [receipt.prompt_sha256]
    assert receipt.system_prompt == ""
    assert injection_log_verify()["ok"] is True
    event = InjectionRecord.objects.get(seq=certificate["event_seq"])
    assert event.source == "erasure"


def test_erasing_an_episode_removes_it_from_compiled_bundles(default_project):
    phone = "+44 20 7946 0958"
    episode = episode_record(
        project=default_project,
        title="Deploy notes",
        category="session_note",
        content=f"deploy contact on call {phone} for the billing bucket",
        entities_mentioned=["billing"],
    )
    before = context_compile(project=default_project, query="deploy billing bucket key")
    assert phone in before["markdown"]
    code, text, _ = run_erase(
        "--episode", episode["id"], "--project", "default", "--reason", "personal data"
    )
    assert code == 0 and "ERASURE CERTIFICATE" in text and "sha256:" in text
    after = context_compile(project=default_project, query="deploy billing bucket key")
    assert phone not in after["markdown"]
    assert phone not in every_table_text()
    assert integrity.integrity_verify(project=default_project)["verified"] is True
    assert injection_log_verify()["ok"] is True


def test_erase_needs_a_reason_and_a_known_target(default_project):
    code, _, err = run_erase("--trace", "00000000-0000-0000-0000-000000000000", "--reason", "x")
    assert code == 2 and "no trace" in err
    code, _, err = run_erase("--text-sha", "0" * 64, "--reason", " ")
    assert code == 2 and "reason" in err
