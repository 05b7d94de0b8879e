"""POST /v1/sessions/save scores and stores a summary; GET /v1/sessions/load returns only fresh,
trusted context and receipts it."""

from datetime import timedelta

import pytest

from audit_app.models import InjectionRecord
from memoryproject.timeutil import utcnow
from memoryproject.tokens import count_tokens
from sessions_app.models import SessionSummary, Trace
from sessions_app.session_memory import SUMMARY_PREAMBLE
from tests.sessions_app.factories import (
    STRUCTURED_SUMMARY,
    ProjectFactory,
    SessionSummaryFactory,
    vague_summary,
)

pytestmark = pytest.mark.django_db


def save(client, summary, **extra):
    return client.post("/v1/sessions/save", {"summary": summary, **extra}, format="json")


def test_a_structured_summary_saves_as_a_passing_trace_and_loads(api):
    saved = save(api, STRUCTURED_SUMMARY)
    assert saved.status_code == 201
    body = saved.json()
    assert body["decision"] == "PASS"
    assert body["trust_score"] == body["confidence"] >= 0.9
    assert body["tokens"] == count_tokens(STRUCTURED_SUMMARY.strip())
    assert body["signals"]["elements"]["key_files"]["evidence"] == "labelled"

    trace = api.get(f"/v1/traces/{body['trace_id']}").json()
    assert trace["policy"] == "session_save"
    assert trace["metadata"]["key_files"] == [
        "sessions_app/services.py",
        "sessions_app/domain/summary.py",
    ]

    loaded = api.get("/v1/sessions/load").json()
    assert loaded["found"] is True
    assert loaded["trace_id"] == body["trace_id"]
    assert loaded["summary"] == STRUCTURED_SUMMARY.strip()
    header, _, rest = loaded["system_prompt"].partition("\n")
    assert header.startswith(f"SESSION_CONTEXT: (trust={body['trust_score']:.2f}, saved ")
    # The summary is delivered spotlighted: said to be data, between the marks.
    assert rest == f"{SUMMARY_PREAMBLE}\n«{STRUCTURED_SUMMARY.strip()}»"


def test_a_vague_summary_of_the_same_length_saves_but_is_refused_by_load(api):
    vague = vague_summary(len(STRUCTURED_SUMMARY))
    body = save(api, vague).json()
    assert body["trust_score"] < 0.45
    assert body["decision"] == "ESCALATE"
    assert body["signals"]["components"]["vagueness"] == 1.0

    loaded = api.get("/v1/sessions/load").json()
    assert loaded["found"] is False
    assert loaded["rule"] == "threshold"
    assert "below the threshold 0.4500" in loaded["reason"]
    assert InjectionRecord.objects.count() == 0


def test_load_returns_the_latest_summary_that_passes(api, default_project):
    older = SessionSummaryFactory(created_at=utcnow() - timedelta(days=1))
    SessionSummaryFactory(trust_score=0.2, risk=0.8, decision="ESCALATE")
    loaded = api.get("/v1/sessions/load").json()
    assert loaded["trace_id"] == str(older.trace.trace_id)


def test_a_stale_summary_is_refused_naming_the_max_age_rule(api, default_project):
    SessionSummaryFactory(created_at=utcnow() - timedelta(days=15))
    loaded = api.get("/v1/sessions/load").json()
    assert loaded["found"] is False
    assert loaded["rule"] == "max_age"
    assert loaded["reason"].startswith("max_age:")
    assert "older than max_age_days=14" in loaded["reason"]
    assert "system_prompt" not in loaded and "summary" not in loaded
    assert InjectionRecord.objects.count() == 0


def test_max_age_days_widens_the_window(api, default_project):
    SessionSummaryFactory(created_at=utcnow() - timedelta(days=15))
    assert api.get("/v1/sessions/load", {"max_age_days": 30}).json()["found"] is True


def test_threshold_can_be_raised_by_the_caller(api, default_project):
    SessionSummaryFactory(trust_score=0.6, risk=0.4, decision="REFINE")
    assert api.get("/v1/sessions/load").json()["found"] is True
    refused = api.get("/v1/sessions/load", {"threshold": 0.7}).json()
    assert refused["found"] is False and refused["rule"] == "threshold"


def test_no_summary_says_how_to_save_one(api):
    loaded = api.get("/v1/sessions/load").json()
    assert loaded == {
        "found": False,
        "project": "default",
        "rule": "none",
        "reason": loaded["reason"],
        "threshold": 0.45,
        "max_age_days": 14,
    }
    assert "POST /v1/sessions/save" in loaded["reason"]


def test_a_load_that_returns_context_leaves_one_injection_record(client_for, default_project):
    SessionSummaryFactory()
    body = client_for("read").get("/v1/sessions/load").json()
    record = InjectionRecord.objects.get()
    assert record.pk == body["injection_id"]
    assert (record.source, record.status, record.mode, record.channel) == (
        "load",
        "injected",
        "load",
        "rest",
    )
    assert record.system_prompt == body["system_prompt"]
    assert record.trace_ids == [body["trace_id"]]
    assert record.threshold == 0.45
    assert record.client.startswith("api_key:")


def test_load_reads_only_the_requested_project(client_for):
    SessionSummaryFactory(project=ProjectFactory(slug="beta"))
    assert (
        client_for("read", ["alpha"]).get("/v1/sessions/load", {"project": "beta"}).status_code
        == 404
    )
    alpha = client_for("read", ["alpha"]).get("/v1/sessions/load").json()
    assert alpha["found"] is False and alpha["project"] == "alpha"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"summary": ""}, "summary"),
        ({"summary": "   \n "}, "summary"),
        ({"summary": 42}, "summary"),
        ({"summary": ["a"]}, "summary"),
        ({}, "summary"),
        ({"summary": "x" * 20001}, "summary"),
        ({"summary": "fine", "project": "Not A Slug!"}, "project"),
    ],
)
def test_bad_summaries_are_400_naming_the_field_and_write_nothing(api, payload, field):
    response = api.post("/v1/sessions/save", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert SessionSummary.objects.count() == 0
    assert Trace.objects.count() == 0


def test_the_size_limit_is_a_setting(api, settings):
    settings.SESSION_SUMMARY_MAX_CHARS = 100
    response = save(api, STRUCTURED_SUMMARY)
    assert response.status_code == 400
    assert "at most 100 characters" in response.json()["message"]


def test_a_read_key_cannot_save(client_for):
    assert save(client_for("read"), STRUCTURED_SUMMARY).status_code == 403


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"threshold": "1.5"}, "threshold"),
        ({"threshold": "-0.1"}, "threshold"),
        ({"threshold": "high"}, "threshold"),
        ({"max_age_days": "0"}, "max_age_days"),
        ({"max_age_days": "two"}, "max_age_days"),
        ({"max_age_days": "1.5"}, "max_age_days"),
    ],
)
def test_bad_load_parameters_are_400_naming_the_field(api, default_project, params, field):
    SessionSummaryFactory()
    response = api.get("/v1/sessions/load", params)
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert InjectionRecord.objects.count() == 0


def test_a_summary_with_a_nul_character_is_refused(api):
    response = save(api, STRUCTURED_SUMMARY + "\u0000")
    assert response.status_code == 400
    assert "NUL" in response.json()["fields"]["summary"][0]
    assert SessionSummary.objects.count() == 0
