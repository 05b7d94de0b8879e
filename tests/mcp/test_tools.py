"""Every tool through the real server: what it does to memory, and its receipts."""

from __future__ import annotations

import pytest

from audit_app.models import InjectionRecord
from memoryproject.models import Project
from sessions_app.trace_writes import trace_record
from tests.mcp.conftest import CLIENT_NAME, key_label, structured, text_of, write_key

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GOOD_SUMMARY = """\
Active project: memoryproject, the MCP server for agent memory.
Last decision: MCP tools stay thin adapters over sessions_app.services and graph_app.services.
Current output: memoryproject/mcp.py builds the MCPServer; manage.py mcp_serve serves stdio.
Open questions: should the HTTP transport require an API key before the security work lands?
Key files: memoryproject/mcp.py, sessions_app/mcp_tools.py, graph_app/mcp_tools.py"""


def test_graph_tools_supersede_time_travel_query_retract_and_verify(mcp):
    async def scenario(session):
        out = {}
        out["episode"] = await session.call_tool(
            "memory_record_episode",
            {
                "title": "Adopt PASETO v4 public tokens",
                "category": "adr",
                "content": "auth_service signs tokens with PASETO_v4_public; JWT_HS256 is retired.",
                "files_touched": ["auth/tokens.py"],
                "entities_mentioned": ["auth_service"],
                "occurred_at": "2026-04-19T12:00:00Z",
            },
        )
        episode_id = structured(out["episode"])["id"]
        out["jwt"] = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "auth_service",
                "predicate": "uses_token_format",
                "object_value": "JWT_HS256",
                "valid_from": "2026-01-10T00:00:00Z",
            },
        )
        out["paseto"] = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "auth_service",
                "predicate": "uses_token_format",
                "object_value": "PASETO_v4_public",
                "valid_from": "2026-04-20T00:00:00Z",
                "source_episode": episode_id,
            },
        )
        out["again"] = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "auth_service",
                "predicate": "uses_token_format",
                "object_value": "PASETO_v4_public",
                "valid_from": "2026-04-20T00:00:00Z",
                "source_episode": episode_id,
            },
        )
        out["edge1"] = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "order_repository",
                "predicate": "depends_on",
                "object_value": "payment_ledger",
                "object_entity": "payment_ledger",
                "singular": False,
            },
        )
        out["edge2"] = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "checkout_api",
                "predicate": "depends_on",
                "object_value": "order_repository",
                "object_entity": "order_repository",
                "singular": False,
            },
        )
        out["past"] = await session.call_tool(
            "memory_time_travel", {"as_of": "2026-02-01T00:00:00Z"}
        )
        out["entity"] = await session.call_tool(
            "memory_query_entity", {"entity_id": "auth_service"}
        )
        out["ledger"] = await session.call_tool(
            "memory_query_entity", {"entity_id": "payment_ledger", "max_hops": 2}
        )
        out["compiled"] = await session.call_tool(
            "memory_compile_context", {"query": "auth_service token format", "max_tokens": 400}
        )
        out["stale"] = await session.call_tool(
            "memory_compile_context",
            {"query": "auth_service token format", "include_superseded": True},
        )
        owner = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "auth_service",
                "predicate": "owned_by",
                "object_value": "team_identity",
            },
        )
        out["retract"] = await session.call_tool(
            "memory_retract_fact", {"fact_id": structured(owner)["fact"]["id"]}
        )
        out["retract_twice"] = await session.call_tool(
            "memory_retract_fact", {"fact_id": structured(owner)["fact"]["id"]}
        )
        out["verify"] = await session.call_tool("memory_verify_integrity", {})
        return out

    out = mcp(scenario)
    episode = structured(out["episode"])
    assert episode["created"] is True and len(episode["sha256"]) == 64
    assert "Adopt PASETO v4 public tokens" in text_of(out["episode"])

    paseto = structured(out["paseto"])
    jwt_id = structured(out["jwt"])["fact"]["id"]
    assert paseto["outcome"] == "active"
    assert [f["id"] for f in paseto["superseded"]] == [jwt_id]
    assert paseto["superseded"][0]["valid_until"] == "2026-04-20T00:00:00Z"
    assert "Superseded" in text_of(out["paseto"]) and "JWT_HS256" in text_of(out["paseto"])
    again = structured(out["again"])
    assert (again["outcome"], again["created"]) == ("unchanged", False)

    past = structured(out["past"])
    assert [f["object_value"] for f in past["facts"]] == ["JWT_HS256"]
    assert len(past["snapshot_hash"]) == 64

    entity = structured(out["entity"])
    assert [f["object_value"] for f in entity["facts"]] == ["PASETO_v4_public"]
    assert [(f["object_value"], f["valid_from"], f["valid_until"]) for f in entity["history"]] == [
        ("JWT_HS256", "2026-01-10T00:00:00Z", "2026-04-20T00:00:00Z")
    ]
    assert [e["id"] for e in entity["episodes"]] == [episode["id"]]

    ledger = structured(out["ledger"])
    hops = {node["id"]: node["hops"] for node in ledger["ego_graph"]["nodes"]}
    assert hops == {"payment_ledger": 0, "order_repository": 1, "checkout_api": 2}

    compiled = structured(out["compiled"])
    assert compiled["token_count"] <= 400 == compiled["max_tokens"]
    assert "PASETO_v4_public" in compiled["markdown"]
    assert "--> JWT_HS256" not in compiled["markdown"]  # superseded: never in active context
    assert text_of(out["compiled"]) == compiled["markdown"]
    assert "--> JWT_HS256" in structured(out["stale"])["markdown"]

    retracted = structured(out["retract"])
    assert retracted["retracted"] is True and retracted["fact"]["status"] == "retracted"
    assert out["retract_twice"].is_error and "already" in text_of(out["retract_twice"])

    verify = structured(out["verify"])
    assert verify["verified"] is True
    assert verify["facts"] == 5 and verify["episodes"] == 1  # the re-assertion added no row


def test_integrity_names_a_row_changed_behind_the_applications_back(mcp):
    from django.db import connection

    from graph_app.models import TemporalFact

    async def write(session):
        return structured(
            await session.call_tool(
                "memory_upsert_fact",
                {"subject_id": "billing", "predicate": "currency", "object_value": "EUR"},
            )
        )["fact"]["id"]

    fact_id = mcp(write)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TemporalFact._meta.db_table} SET object_value = %s WHERE id = %s",
            ["USD", fact_id],
        )

    async def verify(session):
        return await session.call_tool("memory_verify_integrity", {})

    result = mcp(verify)
    body = structured(result)
    assert body["verified"] is False and body["mismatched_ids"] == [fact_id]
    assert "TAMPERED" in text_of(result) and fact_id in text_of(result)


def test_save_then_load_session_receipts_the_injection_with_the_client_name(mcp):
    key = write_key(("default", "vague"))

    async def scenario(session):
        saved = await session.call_tool("save_session", {"summary": GOOD_SUMMARY})
        loaded = await session.call_tool("load_session", {})
        vague = await session.call_tool(
            "save_session",
            {
                "summary": "Did some stuff, things mostly work, will continue later.",
                "project": "vague",
            },
        )
        refused = await session.call_tool("load_session", {"project": "vague", "max_age_days": 1})
        empty = await session.call_tool("save_session", {"summary": ""})
        return saved, loaded, refused, vague, empty

    saved, loaded, refused, vague, empty = mcp(scenario, "--api-key", key)
    saved_body = structured(saved)
    assert saved_body["decision"] == "PASS" and saved_body["tokens"] > 0
    loaded_body = structured(loaded)
    assert loaded_body["found"] is True and loaded_body["trace_id"] == saved_body["trace_id"]
    assert loaded_body["system_prompt"].startswith("SESSION_CONTEXT: (trust=")
    assert text_of(loaded) == loaded_body["system_prompt"]
    assert structured(vague)["trust_score"] < 0.45
    assert empty.is_error and "summary" in text_of(empty)

    refused_body = structured(refused)
    assert (refused_body["found"], refused_body["rule"]) == (False, "threshold")
    assert text_of(refused).startswith("No session context returned: threshold:")

    record = InjectionRecord.objects.get(pk=loaded_body["injection_id"])
    assert (record.channel, record.client, record.client_reported, record.source) == (
        "mcp",
        key_label(key),
        CLIENT_NAME,
        "load",
    )
    assert record.system_prompt == loaded_body["system_prompt"]
    # Only returned context is receipted: the refused load wrote nothing.
    assert InjectionRecord.objects.count() == 1


def test_plan_context_injects_flags_and_receipts_every_call(mcp):
    project = Project.objects.get(slug="default")
    key = write_key(("default", "brand-new"), scope="read")
    for i, trust in enumerate((0.95, 0.8, 0.9)):
        trace_record(
            project=project,
            model="claude-sonnet",
            trust_score=trust,
            active_project="memoryproject",
            last_decision=f"decision {i}: keep MCP tools thin",
            current_output="memoryproject/mcp.py",
            open_questions=["API key on HTTP?"],
        )

    async def scenario(session):
        injected = await session.call_tool("plan_context", {"n": 3, "trust_threshold": 0.5})
        flagged = await session.call_tool("plan_context", {"n": 3, "trust_threshold": 0.99})
        dry = await session.call_tool("plan_context", {"mode": "dry_run"})
        empty = await session.call_tool("plan_context", {"project": "brand-new"})
        missing = await session.call_tool("plan_context", {"project": "nowhere"})
        bad = await session.call_tool("plan_context", {"n": 0})
        return injected, flagged, dry, empty, missing, bad

    # A plan only reads memory (plus its receipt): a read-scoped key may ask for one, as over
    # REST; a project that does not exist is an error, never created.
    injected, flagged, dry, empty, missing, bad = mcp(
        scenario, "--api-key", key, client_name="cursor-test"
    )
    body = structured(injected)
    assert body["status"] == "injected" and body["system_prompt"]
    assert 0.5 <= body["trust_score"] < 0.99
    assert body["system_prompt"] in text_of(injected)
    assert body["context"]["last_decision"] == "decision 2: keep MCP tools thin"
    assert structured(flagged)["status"] == "flagged"
    assert "below threshold" in structured(flagged)["flagged_reason"]
    assert "system_prompt" not in structured(flagged)
    assert structured(dry)["dry_run"] is True and structured(dry)["status"] == "flagged"
    assert structured(empty)["status"] == "empty" and structured(empty)["decision"] == "ESCALATE"
    assert missing.is_error and "no project 'nowhere'" in text_of(missing)
    assert not Project.objects.filter(slug="nowhere").exists()
    assert bad.is_error and "n" in text_of(bad)

    records = list(InjectionRecord.objects.order_by("seq"))
    assert len(records) == 4  # the rejected calls wrote nothing
    assert {(r.channel, r.client, r.client_reported, r.source) for r in records} == {
        ("mcp", key_label(key), "cursor-test", "plan")
    }
    assert records[0].pk == body["injection_id"]
    assert records[0].system_prompt == body["system_prompt"]
    assert [r.status for r in records] == ["injected", "flagged", "flagged", "empty"]


async def _default_and_explicit(session):
    default = await session.call_tool(
        "memory_upsert_fact", {"subject_id": "svc", "predicate": "lang", "object_value": "go"}
    )
    other = await session.call_tool(
        "memory_upsert_fact",
        {"subject_id": "svc", "predicate": "lang", "object_value": "rust", "project": "beta"},
    )
    unknown = await session.call_tool("memory_verify_integrity", {"project": "nowhere"})
    invalid = await session.call_tool("memory_verify_integrity", {"project": "Not A Slug!"})
    return default, other, unknown, invalid


def test_a_local_identity_acts_on_its_own_project_only(mcp):
    from graph_app.models import TemporalFact

    Project.objects.create(slug="alpha")
    Project.objects.create(slug="beta")
    default, other, unknown, invalid = mcp(_default_and_explicit, "--project", "alpha")
    assert structured(default)["fact"]["project"] == "alpha"
    assert other.is_error and "may not write to project 'beta'" in text_of(other)
    assert unknown.is_error and "no project 'nowhere'" in text_of(unknown)
    assert invalid.is_error and "project" in text_of(invalid)
    assert not TemporalFact.objects.filter(project__slug="beta").exists()
    assert not Project.objects.filter(slug="nowhere").exists()


def test_an_api_key_server_defaults_to_the_named_project_among_the_keys(mcp):
    key = write_key(("alpha", "beta"))
    default, other, unknown, invalid = mcp(
        _default_and_explicit, "--project", "alpha", "--api-key", key
    )
    assert structured(default)["fact"]["project"] == "alpha"
    assert structured(other)["fact"]["project"] == "beta"
    assert unknown.is_error and "no project 'nowhere' for this API key" in text_of(unknown)
    assert invalid.is_error and "project" in text_of(invalid)
    assert not Project.objects.filter(slug="nowhere").exists()
