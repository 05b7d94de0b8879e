"""A trace must record its step: an empty body, or a text field holding only whitespace, is
refused with a 400 naming the field, by every door that records traces (REST, the service's
keyword door, the CognOS import), and nothing is written."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from memoryproject.errors import ApplicationError
from memoryproject.timeutil import iso, utcnow
from sessions_app.contracts import TRACE_RECORDED_FIELDS
from sessions_app.models import Trace
from sessions_app.trace_writes import trace_record
from tests.sessions_app.test_import_cognos import cognos_db

pytestmark = pytest.mark.django_db

SOME_ID = "6f9619ff-8b86-4011-b42d-00c04fc964ff"


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"metadata": {}},
        {"open_questions": []},
        {"trace_id": SOME_ID},
        {"created_at": "2026-11-01T00:00:00Z"},
        {"project": "default"},
        {"model": None, "policy": None},
    ],
)
def test_a_trace_that_records_nothing_is_400_naming_the_fields_it_needs(api, payload):
    response = api.post("/v1/traces", payload, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert list(body["fields"]) == ["body"]
    assert body["message"].startswith("body: a trace must record its step")
    for name in TRACE_RECORDED_FIELDS:
        assert name in body["message"]
    assert not Trace.objects.exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"model": "   "}, "model"),
        ({"model": ""}, "model"),
        ({"policy": "\t\n", "model": "m"}, "policy"),
        ({"active_project": "  "}, "active_project"),
        ({"model": "m", "last_decision": ""}, "last_decision"),
        ({"model": "m", "current_output": " \n "}, "current_output"),
        ({"model": "m", "open_questions": "   "}, "open_questions"),
        ({"model": "m", "open_questions": ["cap retries at 5?", "  "]}, "open_questions"),
        ({"model": "m", "key_files": [" "]}, "key_files"),
        ({"metadata": {"active_project": "   "}}, "active_project"),
        ({"metadata": {"last_decision": "\u3000"}}, "last_decision"),
    ],
)
def test_whitespace_only_text_is_400_naming_the_field_and_writes_nothing(api, payload, field):
    response = api.post("/v1/traces", payload, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert field in body["fields"]
    assert body["message"].startswith(f"{field}: must not")
    assert not Trace.objects.exists()


@pytest.mark.parametrize(
    "payload",
    [{"status_code": 200}, {"trust_score": 0.7}, {"tool": "pytest"}, {"open_questions": ["q?"]}],
)
def test_one_recorded_field_is_enough(api, payload):
    response = api.post("/v1/traces", payload, format="json")
    assert response.status_code == 201, response.json()
    assert Trace.objects.count() == 1


def test_the_service_door_applies_the_same_rules(default_project):
    with pytest.raises(ApplicationError) as empty:
        trace_record(project=default_project, created_at=iso(utcnow()))
    assert empty.value.field == "body"
    with pytest.raises(ApplicationError) as blank:
        trace_record(project=default_project, policy=" ")
    assert blank.value.field == "policy"
    assert not Trace.objects.exists()


def test_the_cognos_import_skips_empty_and_blank_rows_with_their_reason(tmp_path):
    rows = [
        {"trace_id": "77777777-7777-4777-8777-777777777777", "created_at": "2026-11-01T00:00Z"},
        {
            "trace_id": "88888888-8888-4888-8888-888888888888",
            "created_at": "2026-11-01T00:00:00+00:00",
            "model": "   ",
        },
    ]
    path = cognos_db(tmp_path / "traces.sqlite3", rows)
    out = io.StringIO()
    call_command("import_cognos_traces", str(path), "--project", "billing", "--json", stdout=out)
    report = json.loads(out.getvalue())
    reasons = {row["trace_id"]: row["reason"] for row in report["skipped_rows"]}
    assert report["imported"] == 0
    assert reasons["77777777-7777-4777-8777-777777777777"].startswith("body: a trace must")
    assert reasons["88888888-8888-4888-8888-888888888888"].startswith("model: must not be empty")
    assert not Trace.objects.exists()
