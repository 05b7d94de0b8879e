"""The contradiction auditor and Cortex-style facts through a real MCP client."""

from __future__ import annotations

import pytest

from tests.mcp.conftest import structured, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_agents_record_edges_and_audit_contradictions_over_mcp(mcp):
    async def scenario(session):
        edge = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "order_repository",
                "predicate": "depends_on",
                "object_entity": "payment_ledger",
                "singular": False,
            },
        )
        for predicate, value, start in (
            ("uses_token_format", "JWT_HS256", "2026-01-10T00:00:00Z"),
            ("token_format", "PASETO_v4_public", "2026-04-20T00:00:00Z"),
        ):
            await session.call_tool(
                "memory_upsert_fact",
                {
                    "subject_id": "auth_service",
                    "predicate": predicate,
                    "object_value": value,
                    "valid_from": start,
                },
            )
        audit = await session.call_tool("memory_audit_contradictions", {})
        resolved = await session.call_tool("memory_audit_contradictions", {"auto_resolve": True})
        bad = await session.call_tool("memory_audit_contradictions", {"as_of": "2026-02-01"})
        return edge, audit, resolved, bad

    edge, audit, resolved, bad = mcp(scenario)
    assert structured(edge)["fact"]["object_entity"] == "payment_ledger"
    assert structured(edge)["fact"]["object_value"] == "payment_ledger"
    body = structured(audit)
    assert body["open"] == 1 and body["findings"][0]["rule"] == "alias"
    assert "alias on auth_service" in text_of(audit)
    assert structured(resolved)["auto_resolved"] == 1
    assert bad.is_error and "as_of" in text_of(bad) and "timezone" in text_of(bad)


def test_agents_read_a_cited_episode_and_fact_over_mcp(mcp):
    async def scenario(session):
        recorded = await session.call_tool(
            "memory_record_episode",
            {
                "title": "Move tokens to PASETO",
                "category": "adr",
                "external_id": "ADR-12",
                "content": "HS256 secrets were shared across services; PASETO v4 public keys.",
            },
        )
        fact = await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "auth_service",
                "predicate": "token_format",
                "object_value": "PASETO_v4_public",
            },
        )
        fact_id = structured(fact)["fact"]["id"]
        by_citation = await session.call_tool("memory_get_episode", {"episode_id": "[ADR:ADR-12]"})
        by_own_id = await session.call_tool("memory_get_episode", {"episode_id": "ADR-12"})
        cited_fact = await session.call_tool("memory_get_fact", {"fact_id": f"[FACT:{fact_id}]"})
        missing = await session.call_tool("memory_get_episode", {"episode_id": "[ADR:ADR-99]"})
        return recorded, by_citation, by_own_id, cited_fact, fact_id, missing

    recorded, by_citation, by_own_id, cited_fact, fact_id, missing = mcp(scenario)
    episode_id = structured(recorded)["id"]
    assert structured(by_citation)["id"] == structured(by_own_id)["id"] == episode_id
    assert "HS256 secrets were shared" in text_of(by_citation)
    assert structured(cited_fact)["id"] == fact_id
    assert missing.is_error and "no episode" in text_of(missing)


def test_compiled_memory_delivered_over_mcp_is_receipted(mcp):
    import hashlib

    from audit_app.models import InjectionRecord

    async def scenario(session):
        await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "auth_service",
                "predicate": "token_format",
                "object_value": "PASETO_v4_public",
            },
        )
        compiled = await session.call_tool(
            "memory_compile_context", {"query": "auth_service token format"}
        )
        prompt = await session.get_prompt("architecture-briefing", {"component": "auth_service"})
        return compiled, prompt

    compiled, prompt = mcp(scenario)
    body = structured(compiled)
    record = InjectionRecord.objects.get(pk=body["injection_id"])
    assert (record.source, record.channel) == ("compile", "mcp")
    assert record.prompt_sha256 == hashlib.sha256(body["markdown"].encode()).hexdigest()
    assert [i["id"] for i in record.items] == [i["id"] for i in body["items"]]
    text = prompt.messages[0].content.text
    briefing = InjectionRecord.objects.get(source="prompt")
    assert briefing.channel == "mcp" and briefing.request["query"].startswith("auth_service")
    assert briefing.prompt_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert briefing.system_prompt == text
