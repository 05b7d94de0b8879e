"""import_cognos_traces: a database shaped like CognOS's trace store imports, row by row,
through the same validation and scoring as a trace sent over REST."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest
from django.core.management import call_command

from memoryproject.models import Project
from sessions_app.models import Trace

pytestmark = pytest.mark.django_db

# The schema of cognos-gateway src/trace_store.py (init_db).
SCHEMA = """
CREATE TABLE traces (
    trace_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, decision TEXT, policy TEXT,
    trust_score REAL, risk REAL, is_stream INTEGER, status_code INTEGER, model TEXT,
    request_fingerprint TEXT, response_fingerprint TEXT, envelope TEXT, metadata TEXT
)
"""
GATEWAY = "11111111-1111-4111-8111-111111111111"
CONTEXT = "22222222-2222-4222-8222-222222222222"
ERROR = "33333333-3333-4333-8333-333333333333"


def cognos_db(path, rows):
    db = sqlite3.connect(path)
    db.execute(SCHEMA)
    columns = (
        "trace_id",
        "created_at",
        "decision",
        "policy",
        "trust_score",
        "risk",
        "is_stream",
        "status_code",
        "model",
        "request_fingerprint",
        "response_fingerprint",
        "envelope",
        "metadata",
    )
    for row in rows:
        values = [row.get(c) for c in columns]
        db.execute(f"INSERT INTO traces VALUES ({', '.join('?' * len(columns))})", values)
    db.commit()
    db.close()
    return path


ROWS = [
    {  # what the gateway's middleware writes for a request
        "trace_id": GATEWAY,
        "created_at": "2026-11-01T10:00:00.123456+00:00",
        "decision": "PASS",
        "policy": "/v1/plan",
        "trust_score": 0.8,
        "risk": 0.2,
        "is_stream": 0,
        "status_code": 200,
        "model": "python-httpx/0.27",
        "request_fingerprint": json.dumps({"sha256": "ab" * 32}),
        "metadata": json.dumps({"duration_seconds": 0.12, "endpoint": "/v1/plan"}),
    },
    {  # no score: ours scores it from its context fields
        "trace_id": CONTEXT,
        "created_at": "2026-11-02T09:30:00",
        "policy": "agent",
        "model": "claude-sonnet-4",
        "envelope": json.dumps({"v": 1}),
        "metadata": json.dumps(
            {
                "active_project": "billing",
                "last_decision": "retry webhooks",
                "current_output": "billing/webhooks.py",
            }
        ),
    },
    {  # a failed call without a score: risk from the status code
        "trace_id": ERROR,
        "created_at": "2026-11-02T09:31:00+00:00",
        "status_code": 500,
        "policy": "/v1/plan",
        "metadata": json.dumps({"error": "boom"}),
    },
    {"trace_id": "not-a-uuid", "created_at": "2026-11-03T00:00:00+00:00"},
    {"trace_id": "44444444-4444-4444-8444-444444444444", "created_at": "yesterday"},
    {
        "trace_id": "55555555-5555-4555-8555-555555555555",
        "created_at": "2026-11-03T00:00:00+00:00",
        "trust_score": 1.7,
    },
]


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_cognos_traces", *args, stdout=out, stderr=err)
        return 0, out.getvalue(), err.getvalue()
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()


def test_a_cognos_database_imports_with_its_fields_mapped_and_scored(tmp_path):
    path = cognos_db(tmp_path / "traces.sqlite3", ROWS)
    code, stdout, _ = run(str(path), "--project", "billing", "--json")
    assert code == 0
    report = json.loads(stdout)
    assert report["imported"] == 3 and report["scored"] == 2 and report["skipped"] == 3
    reasons = {row["trace_id"]: row["reason"] for row in report["skipped_rows"]}
    assert reasons["not-a-uuid"].startswith("trace_id")
    assert reasons["44444444-4444-4444-8444-444444444444"].startswith("created_at")
    assert reasons["55555555-5555-4555-8555-555555555555"].startswith("trust_score")

    gateway = Trace.objects.get(trace_id=GATEWAY)
    assert gateway.project.slug == "billing" and gateway.policy == "/v1/plan"
    assert (gateway.decision, gateway.trust_score, gateway.risk) == ("PASS", 0.8, 0.2)
    assert gateway.created_at.microsecond == 123456 and gateway.status_code == 200
    assert gateway.metadata["endpoint"] == "/v1/plan"
    assert gateway.metadata["cognos"]["request_fingerprint"] == {"sha256": "ab" * 32}
    assert gateway.metadata["cognos"]["is_stream"] is False

    context = Trace.objects.get(trace_id=CONTEXT)
    assert context.trust_score > 0.5 and context.decision in ("PASS", "REFINE")
    assert context.created_at.isoformat().startswith("2026-11-02T09:30:00+00:00")
    assert context.metadata["cognos"] == {"envelope": {"v": 1}}
    failed = Trace.objects.get(trace_id=ERROR)
    assert failed.risk > context.risk and failed.status_code == 500

    # Running it again imports nothing twice.
    code, stdout, _ = run(str(path), "--project", "billing", "--json")
    again = json.loads(stdout)
    assert again["imported"] == 0 and "already exists" in again["skipped_rows"][0]["reason"]
    assert Trace.objects.filter(project__slug="billing").count() == 3


def test_text_output_lists_skipped_rows(tmp_path):
    path = cognos_db(tmp_path / "traces.sqlite3", ROWS[3:4])
    code, stdout, _ = run(str(path), "--project", "billing")
    assert code == 0 and "imported 0 CognOS traces" in stdout and "skipped not-a-uuid" in stdout


def test_bad_input_names_the_argument_and_exits_2(tmp_path):
    code, _, err = run(str(tmp_path / "missing.sqlite3"), "--project", "billing")
    assert code == 2 and "DB: no such file" in err
    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).execute("CREATE TABLE notes (x TEXT)").connection.commit()
    code, stdout, _ = run(str(other), "--project", "billing", "--json")
    assert code == 2 and "no traces table" in json.loads(stdout)["error"]
    assert not Project.objects.filter(slug="billing").exists()
    code, _, err = run(str(other), "--project", "Bad Slug")
    assert code == 2 and "--project" in err
