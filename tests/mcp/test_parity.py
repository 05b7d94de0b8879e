"""MCP and REST are two doors onto the same services: same answers, same data."""

from __future__ import annotations

import pytest

from memoryproject.models import Project
from sessions_app.trace_writes import trace_record
from tests.mcp.conftest import structured
from tests.mcp.test_tools import GOOD_SUMMARY

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _seed_graph(api) -> None:
    for body in (
        {
            "subject_id": "auth_service",
            "predicate": "uses_token_format",
            "object_value": "JWT_HS256",
            "valid_from": "2026-01-10T00:00:00Z",
        },
        {
            "subject_id": "auth_service",
            "predicate": "uses_token_format",
            "object_value": "PASETO_v4_public",
            "valid_from": "2026-04-20T00:00:00Z",
        },
        {
            "subject_id": "order_repository",
            "predicate": "depends_on",
            "object_value": "payment_ledger",
            "object_entity": "payment_ledger",
            "singular": False,
        },
    ):
        assert api.post("/v1/graph/facts", body, format="json").status_code in (200, 201)
    response = api.post(
        "/v1/graph/episodes",
        {
            "title": "Ledger writes are idempotent",
            "category": "invariant",
            "content": "payment_ledger accepts the same posting twice without double booking.",
            "entities_mentioned": ["payment_ledger"],
        },
        format="json",
    )
    assert response.status_code in (200, 201), response.content


@pytest.mark.parametrize(
    "body",
    [
        {"query": "auth_service token format", "max_tokens": 300},
        {"query": "order_repository invariants", "max_tokens": 1200},
        {"query": "auth_service token", "as_of": "2026-02-01T00:00:00Z"},
        {"query": "auth_service token", "include_superseded": True},
    ],
)
def test_compile_context_matches_rest(mcp, api, body):
    _seed_graph(api)
    rest = api.post("/v1/graph/compile", body, format="json")
    assert rest.status_code == 200, rest.content

    async def scenario(session):
        return structured(await session.call_tool("memory_compile_context", body))

    tool = mcp(scenario)
    assert tool["items"], "the seeded memory must match the query"
    assert tool["items"] == rest.json()["items"]
    assert tool["markdown"] == rest.json()["markdown"]
    assert tool["token_count"] == rest.json()["token_count"]


def test_compile_context_rejects_what_rest_rejects(mcp, api):
    rest = api.post("/v1/graph/compile", {"query": "x", "as_of": "2026-02-01"}, format="json")
    assert rest.status_code == 400 and "as_of" in rest.json()["fields"]

    async def scenario(session):
        return await session.call_tool(
            "memory_compile_context", {"query": "x", "as_of": "2026-02-01"}
        )

    result = mcp(scenario)
    assert result.is_error
    assert rest.json()["message"] in result.content[0].text


def test_plan_context_matches_rest(mcp, api):
    project = Project.objects.get(slug="default")
    for i, trust in enumerate((0.9, 0.7, 0.85)):
        trace_record(
            project=project,
            model="claude-sonnet",
            trust_score=trust,
            active_project="memoryproject",
            last_decision=f"decision {i}",
            current_output="tests/mcp",
            open_questions=["parity?"],
        )
    for body in (
        {"n": 3, "trust_threshold": 0.5},
        {"n": 3, "trust_threshold": 0.99},
        {"mode": "dry_run"},
    ):
        rest = api.post("/v1/plan", body, format="json")
        assert rest.status_code == 200, rest.content

        async def scenario(session, body=body):
            return structured(await session.call_tool("plan_context", body))

        tool = mcp(scenario)
        expected = rest.json()
        for key in ("status", "decision", "trust_score", "risk", "signals", "context", "trace_ids"):
            assert tool[key] == expected[key], key
        assert tool.get("system_prompt") == expected.get("system_prompt")
        assert tool.get("flagged_reason") == expected.get("flagged_reason")
        assert tool["injection_id"] != expected["injection_id"]


def test_writes_through_mcp_are_visible_through_rest_at_once(mcp, api):
    async def scenario(session):
        fact = structured(
            await session.call_tool(
                "memory_upsert_fact",
                {"subject_id": "search_service", "predicate": "index", "object_value": "tantivy"},
            )
        )
        episode = structured(
            await session.call_tool(
                "memory_record_episode",
                {"title": "Switch to tantivy", "category": "adr", "content": "Faster indexing."},
            )
        )
        saved = structured(
            await session.call_tool(
                "save_session",
                {"summary": GOOD_SUMMARY},
            )
        )
        return fact, episode, saved

    fact, episode, saved = mcp(scenario)
    facts = api.get("/v1/graph/facts", {"subject": "search_service"}).json()
    assert [f["id"] for f in facts["results"]] == [fact["fact"]["id"]]
    assert api.get(f"/v1/graph/episodes/{episode['id']}").json()["sha256"] == episode["sha256"]
    loaded = api.get("/v1/sessions/load").json()
    assert loaded["found"] is True and loaded["trace_id"] == saved["trace_id"]
