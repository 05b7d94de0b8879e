"""POST /v1/traces records a trace; GET lists and shows traces of the key's projects only."""

from datetime import timedelta

import pytest

from memoryproject.timeutil import iso, utcnow
from sessions_app.models import Trace
from tests.sessions_app.factories import ProjectFactory, TraceFactory

pytestmark = pytest.mark.django_db


def test_recording_a_trace_stores_structured_fields_in_metadata(api):
    response = api.post(
        "/v1/traces",
        {
            "model": "claude-sonnet-4",
            "policy": "agent",
            "active_project": "memoryproject",
            "last_decision": "index (project, created_at)",
            "open_questions": ["which page size?"],
            "metadata": {"current_output": "plan endpoint", "tool": "pytest"},
            "status_code": 200,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["project"] == "default"
    assert body["metadata"] == {
        "current_output": "plan endpoint",
        "tool": "pytest",
        "active_project": "memoryproject",
        "last_decision": "index (project, created_at)",
        "open_questions": ["which page size?"],
    }
    # No score was sent: all three required fields present, a successful call -> full trust.
    assert (body["trust_score"], body["risk"], body["decision"]) == (1.0, 0.0, "PASS")
    assert Trace.objects.get(trace_id=body["trace_id"]).model == "claude-sonnet-4"


def test_a_client_score_is_kept_and_the_missing_half_derived(api):
    body = api.post("/v1/traces", {"trust_score": 0.7}, format="json").json()
    assert (body["trust_score"], body["risk"], body["decision"]) == (0.7, 0.3, "REFINE")


def test_a_failed_call_without_score_carries_risk(api):
    body = api.post(
        "/v1/traces",
        {"status_code": 500, "active_project": "p", "last_decision": "d", "current_output": "o"},
        format="json",
    ).json()
    assert body["trust_score"] == 0.5
    assert body["decision"] == "REFINE"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"trust_score": 1.5}, "trust_score"),
        ({"risk": "high"}, "risk"),
        ({"decision": "MAYBE"}, "decision"),
        ({"status_code": 42}, "status_code"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"open_questions": [1, 2]}, "open_questions"),
        ({"active_project": {"x": 1}}, "active_project"),
        ({"created_at": "2026-01-01T00:00:00"}, "created_at"),
        ({"trace_id": "not-a-uuid"}, "trace_id"),
        ({"model": 7}, "model"),
    ],
)
def test_bad_trace_fields_are_400_naming_the_field_and_write_nothing(api, payload, field):
    response = api.post("/v1/traces", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert Trace.objects.count() == 0


def test_a_trace_from_the_future_is_refused(api):
    tomorrow = iso(utcnow() + timedelta(days=1))
    response = api.post("/v1/traces", {"created_at": tomorrow, "model": "m"}, format="json")
    assert response.status_code == 400
    assert "future" in response.json()["fields"]["created_at"][0]


def test_a_duplicate_trace_id_is_a_conflict(api):
    trace = TraceFactory()
    response = api.post(
        "/v1/traces", {"trace_id": str(trace.trace_id), "model": "m"}, format="json"
    )
    assert response.status_code == 409
    assert Trace.objects.count() == 1


def test_a_read_key_cannot_record_traces(client_for):
    response = client_for("read").post("/v1/traces", {}, format="json")
    assert response.status_code == 403


def test_list_is_newest_first_paginated_and_limited_to_the_project(client_for):
    client = client_for("read", ["alpha"])
    alpha = ProjectFactory(slug="alpha")
    old = TraceFactory(project=alpha, created_at=utcnow() - timedelta(days=2))
    new = TraceFactory(project=alpha, created_at=utcnow() - timedelta(hours=1))
    TraceFactory(project=ProjectFactory(slug="beta"))
    body = client.get("/v1/traces?limit=1").json()
    assert body["count"] == 2
    assert [t["trace_id"] for t in body["results"]] == [str(new.trace_id)]
    assert body["next"]
    body = client.get("/v1/traces?limit=1&offset=1").json()
    assert [t["trace_id"] for t in body["results"]] == [str(old.trace_id)]


def test_list_filters_by_decision_model_and_created_range(api, default_project):
    now = utcnow()
    TraceFactory(decision="ESCALATE", model="gpt-4.1", created_at=now - timedelta(days=3))
    wanted = TraceFactory(decision="ESCALATE", model="gpt-4.1", created_at=now - timedelta(hours=2))
    TraceFactory(decision="PASS", model="gpt-4.1", created_at=now - timedelta(hours=2))
    TraceFactory(decision="ESCALATE", model="claude", created_at=now - timedelta(hours=2))
    response = api.get(
        "/v1/traces",
        {
            "decision": "ESCALATE",
            "model": "gpt-4.1",
            "created_after": iso(now - timedelta(days=1)),
            "created_before": iso(now),
        },
    )
    assert [t["trace_id"] for t in response.json()["results"]] == [str(wanted.trace_id)]


def test_list_rejects_a_bad_filter_value(api):
    response = api.get("/v1/traces", {"decision": "MAYBE"})
    assert response.status_code == 400
    assert "decision" in response.json()["fields"]


def test_list_of_a_project_the_key_cannot_see_is_404(client_for):
    ProjectFactory(slug="beta")
    response = client_for("read", ["alpha"]).get("/v1/traces", {"project": "beta"})
    assert response.status_code == 404


def test_detail_shows_a_visible_trace(api):
    trace = TraceFactory()
    body = api.get(f"/v1/traces/{trace.trace_id}").json()
    assert body["trace_id"] == str(trace.trace_id)
    assert body["metadata"]["active_project"] == "memoryproject"


def test_detail_of_a_trace_in_another_project_is_404(client_for):
    hidden = TraceFactory(project=ProjectFactory(slug="beta"))
    client = client_for("read", ["alpha"])
    assert client.get(f"/v1/traces/{hidden.trace_id}").status_code == 404
    assert client.get("/v1/traces/not-a-uuid").status_code == 404


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"metadata": {"note": "a\u0000b"}}, "metadata"),
        ({"open_questions": ["why\u0000?"]}, "metadata"),
        ({"model": "gpt\u0000"}, "model"),
    ],
)
def test_nul_characters_are_refused_on_every_database(api, payload, field):
    response = api.post("/v1/traces", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert Trace.objects.count() == 0


def test_a_nul_character_in_a_filter_is_400(api):
    response = api.get("/v1/traces", {"model": "gpt\u0000"})
    assert response.status_code == 400
    assert "model" in response.json()["fields"]


@pytest.mark.parametrize("value", ["2026-11-01T00:00:00", "yesterday"])
def test_a_created_range_without_a_timezone_or_malformed_is_400(api, value):
    response = api.get("/v1/traces", {"created_after": value})
    assert response.status_code == 400
    assert "created_after" in response.json()["fields"]
