"""REST for auditors (an admin-scope key): the log filtered and paginated, one receipt with its
text and whether each source changed since, and verification of log and graph."""

import pytest

from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear
from sessions_app.plan import plan_context
from sessions_app.trace_writes import trace_record

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_compiler_cache():
    compiler_cache_clear()
    yield
    compiler_cache_clear()


@pytest.fixture
def auditor(client_for):
    return client_for("admin", ("default",))


@pytest.fixture
def delivered(api, default_project):
    trace = trace_record(
        project=default_project,
        model="m",
        active_project="billing",
        last_decision="retry webhooks",
        current_output="billing/webhooks.py",
    )
    plan = plan_context(project=default_project, mode="force")
    fact = fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="token_format",
        object_value="JWT_HS256",
        valid_from="2026-01-10T00:00:00Z",
    )["fact"]
    compiled = api.post("/v1/graph/compile", {"query": "auth_service token format"}, format="json")
    return trace, plan, fact, compiled.json()


def test_only_an_admin_key_reads_the_log(api, client_for, delivered):
    assert api.get("/v1/audit/injections").status_code == 403
    assert client_for("read").get("/v1/audit/verify").status_code == 403


def test_the_log_is_filtered_and_paginated(auditor, delivered):
    trace, plan, fact, compiled = delivered
    everything = auditor.get("/v1/audit/injections").json()
    assert everything["count"] == 2
    assert [r["source"] for r in everything["results"]] == ["compile", "plan"]
    by_trace = auditor.get("/v1/audit/injections", {"trace": trace["trace_id"]}).json()
    assert [r["id"] for r in by_trace["results"]] == [plan["injection_id"]]
    by_item = auditor.get("/v1/audit/injections", {"item": fact["id"]}).json()
    assert [r["id"] for r in by_item["results"]] == [compiled["injection_id"]]
    by_source = auditor.get("/v1/audit/injections", {"source": "compile", "channel": "rest"})
    assert by_source.json()["count"] == 1
    page = auditor.get("/v1/audit/injections", {"limit": 1}).json()
    assert len(page["results"]) == 1 and page["next"]
    bad = auditor.get("/v1/audit/injections", {"created_after": "2026-01-01"})
    assert bad.status_code == 400 and "created_after" in bad.json()["fields"]


def test_a_receipt_tells_which_sources_changed_since(auditor, default_project, delivered):
    _, _, fact, compiled = delivered
    url = f"/v1/audit/injections/{compiled['injection_id']}"
    before = auditor.get(url).json()
    assert before["text"] == compiled["markdown"]
    [source] = [s for s in before["sources"] if s["id"] == fact["id"]]
    assert source["changed_since"] is False
    fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="token_format",
        object_value="PASETO_v4_public",
        valid_from="2026-04-20T00:00:00Z",
    )
    after = auditor.get(url).json()
    [source] = [s for s in after["sources"] if s["id"] == fact["id"]]
    assert source["changed_since"] is True and source["sha256_now"] != source["sha256"]
    assert auditor.get("/v1/audit/injections/999999").status_code == 404


def test_verify_answers_log_and_graph(auditor, delivered):
    body = auditor.get("/v1/audit/verify").json()
    assert body["verified"] is True and body["log"]["ok"] is True
    assert body["graph"]["default"]["verified"] is True
