"""POST /v1/plan: extract, score and inject context from recent traces, receipting each call."""

import hashlib

import pytest

from audit_app.models import InjectionRecord
from sessions_app.models import Trace
from tests.sessions_app.factories import ProjectFactory, TraceFactory

pytestmark = pytest.mark.django_db


def plan(client, **body):
    response = client.post("/v1/plan", body, format="json")
    return response


@pytest.fixture
def trusted_traces(default_project):
    return [TraceFactory(project=default_project) for _ in range(6)]


def test_auto_injects_trusted_context_with_a_system_prompt(api, trusted_traces):
    response = plan(api)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "injected"
    assert body["decision"] == "PASS"
    assert body["trust_score"] == body["confidence"] == 0.9
    assert body["risk"] == 0.1
    assert body["signals"] == {
        "p": 1.0,
        "ue": 0.0,
        "ua": 0.1,
        "total_uncertainty": 0.1,
        "traces_used": 5,
        "fields_present": ["active_project", "last_decision", "current_output"],
    }
    newest = trusted_traces[-1]
    assert body["trace_ids"] == [str(t.trace_id) for t in reversed(trusted_traces[1:])]
    assert body["context"]["last_decision"] == newest.metadata["last_decision"]
    assert body["context"]["recent_models"] == ["claude-sonnet-4"]
    assert len(body["context"]["open_questions"]) == 5
    assert body["system_prompt"].startswith("SESSION_CONTEXT: (trust=0.90")
    assert "flagged_reason" not in body
    assert body["generated_at"].endswith("Z")


def test_auto_flags_context_below_the_threshold(api, default_project):
    TraceFactory(project=default_project, trust_score=0.9, risk=0.1)
    body = plan(api, trust_threshold=0.75).json()
    # One trace: p=1, Ue=0.2, Ua=0.1 -> 0.7 < 0.75
    assert body["status"] == "flagged"
    assert body["flagged_reason"] == (
        "Trust score 0.7000 below threshold 0.7500. Manual review recommended."
    )
    assert "system_prompt" not in body
    assert body["decision"] == "REFINE"


def test_force_injects_even_untrusted_context(api, default_project):
    TraceFactory(project=default_project, trust_score=0.2, risk=0.8, metadata={})
    body = plan(api, mode="force").json()
    assert body["status"] == "injected"
    assert body["decision"] == "ESCALATE"
    assert body["system_prompt"].startswith("SESSION_CONTEXT: (trust=0.00")


def test_dry_run_computes_but_never_injects(api, trusted_traces):
    body = plan(api, mode="dry_run").json()
    assert body["status"] == "flagged"
    assert body["dry_run"] is True
    assert body["would_inject"] is True
    assert "system_prompt" not in body
    assert body["flagged_reason"].startswith("Dry run: nothing injected.")
    assert body["trust_score"] == 0.9
    record = InjectionRecord.objects.get(pk=body["injection_id"])
    assert (record.mode, record.status, record.system_prompt) == ("dry_run", "flagged", "")


def test_dry_run_below_threshold_says_auto_would_flag(api, default_project):
    TraceFactory(project=default_project)
    body = plan(api, mode="dry_run", trust_threshold=0.99).json()
    assert body["would_inject"] is False
    assert "below threshold 0.9900" in body["flagged_reason"]


@pytest.mark.parametrize("mode", ["auto", "force", "dry_run"])
def test_no_traces_is_empty_and_escalates_with_how_to_start(api, mode):
    body = plan(api, mode=mode).json()
    assert body["status"] == "empty"
    assert body["decision"] == "ESCALATE"
    assert body["trust_score"] == 0.0 and body["risk"] == 1.0
    assert "POST /v1/traces" in body["flagged_reason"]
    assert body["trace_ids"] == []
    assert InjectionRecord.objects.get(pk=body["injection_id"]).status == "empty"


def test_n_limits_the_traces_used(api, trusted_traces):
    body = plan(api, n=2).json()
    assert len(body["trace_ids"]) == 2
    assert body["signals"]["traces_used"] == 2


def test_divergent_traces_lower_trust(api, default_project):
    TraceFactory(project=default_project, trust_score=0.2, risk=0.8)
    TraceFactory(project=default_project, trust_score=1.0, risk=0.0)
    body = plan(api).json()
    assert body["signals"]["ue"] == pytest.approx(0.64)  # variance 0.16 * 4
    assert body["status"] == "flagged"


def test_plan_reads_only_the_requested_project(client_for):
    TraceFactory(project=ProjectFactory(slug="alpha"))
    TraceFactory(project=ProjectFactory(slug="beta"))
    client = client_for("read", ["alpha", "beta"])
    body = plan(client, project="beta").json()
    assert [str(Trace.objects.get(trace_id=t).project) for t in body["trace_ids"]] == ["beta"]


def test_a_read_key_may_plan_but_not_for_a_foreign_project(client_for):
    ProjectFactory(slug="beta")
    client = client_for("read", ["alpha"])
    assert plan(client).status_code == 200
    assert plan(client, project="beta").status_code == 404
    assert InjectionRecord.objects.count() == 1


@pytest.mark.parametrize("mode", ["auto", "force", "dry_run"])
def test_every_plan_call_leaves_exactly_one_injection_record(api, make_key, trusted_traces, mode):
    before = InjectionRecord.objects.count()
    body = plan(api, mode=mode, n=3).json()
    assert InjectionRecord.objects.count() == before + 1
    record = InjectionRecord.objects.get(pk=body["injection_id"])
    prompt = body.get("system_prompt", "")
    assert record.system_prompt == prompt
    assert record.prompt_sha256 == hashlib.sha256(prompt.encode()).hexdigest()
    assert record.source == "plan"
    assert record.channel == "rest"
    assert record.client.startswith("api_key:") and "(test key)" in record.client
    assert (record.status, record.decision, record.mode) == (body["status"], body["decision"], mode)
    assert record.trust_score == body["trust_score"]
    assert record.threshold == 0.75
    assert record.trace_ids == body["trace_ids"]
    assert record.project.slug == "default"


BAD_BODIES = [
    ({"n": 0}, "n"),
    ({"n": 51}, "n"),
    ({"n": "5"}, "n"),
    ({"n": 2.5}, "n"),
    ({"n": True}, "n"),
    ({"trust_threshold": 1.01}, "trust_threshold"),
    ({"trust_threshold": -0.1}, "trust_threshold"),
    ({"trust_threshold": "high"}, "trust_threshold"),
    ({"mode": "yolo"}, "mode"),
    ({"mode": 1}, "mode"),
    ({"project": 5}, "project"),
    ({"treshold": 0.5}, "treshold"),
]


@pytest.mark.parametrize(("body", "field"), BAD_BODIES)
def test_bad_input_is_400_naming_the_field_and_records_nothing(api, trusted_traces, body, field):
    traces = Trace.objects.count()
    response = plan(api, **body)
    assert response.status_code == 400
    payload = response.json()
    assert field in payload["fields"]
    assert payload["message"].startswith(f"{field}:")
    assert InjectionRecord.objects.count() == 0
    assert Trace.objects.count() == traces


def test_a_body_that_is_not_json_is_400_and_records_nothing(api):
    response = api.post("/v1/plan", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert "body" in response.json()["fields"]
    assert InjectionRecord.objects.count() == 0


def test_a_json_array_body_is_400(api):
    response = api.post("/v1/plan", [1, 2], format="json")
    assert response.status_code == 400
    assert "body" in response.json()["fields"]


def test_an_empty_body_uses_the_defaults(api, trusted_traces):
    response = api.post("/v1/plan", content_type="application/json")
    assert response.status_code == 200
    assert len(response.json()["trace_ids"]) == 5


def test_a_form_encoded_body_is_400_asking_for_json(api):
    response = api.post("/v1/plan", {"n": 3})  # multipart, not JSON
    assert response.status_code == 400
    assert "application/json" in response.json()["fields"]["body"][0]
    assert InjectionRecord.objects.count() == 0
