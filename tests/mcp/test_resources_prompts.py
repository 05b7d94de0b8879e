"""Resources and prompts: read from live memory, assembled from compiled context."""

from __future__ import annotations

import json

import pytest
from mcp import MCPError

from audit_app.models import InjectionRecord
from tests.mcp.conftest import CLIENT_NAME, LOCAL_WRITE, structured
from tests.mcp.test_tools import GOOD_SUMMARY

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


async def _seed(session) -> dict:
    episode = structured(
        await session.call_tool(
            "memory_record_episode",
            {
                "title": "Ledger writes are idempotent",
                "category": "invariant",
                "content": "payment_ledger must accept the same posting twice without double "
                "booking; order_repository relies on it when it retries.",
                "entities_mentioned": ["payment_ledger", "order_repository"],
            },
        )
    )
    bug = structured(
        await session.call_tool(
            "memory_record_episode",
            {
                "title": "Duplicate charges after checkout timeout",
                "category": "bug_root_cause",
                "content": "checkout_api retried on a 504 and order_repository posted to "
                "payment_ledger twice; root cause: missing idempotency key.",
                "entities_mentioned": ["checkout_api", "payment_ledger"],
                "files_touched": ["orders/repository.py"],
            },
        )
    )
    fact = structured(
        await session.call_tool(
            "memory_upsert_fact",
            {
                "subject_id": "order_repository",
                "predicate": "depends_on",
                "object_value": "payment_ledger",
                "object_entity": "payment_ledger",
                "singular": False,
            },
        )
    )
    return {"episode": episode, "bug": bug, "fact": fact}


def test_every_resource_reads_live_memory(mcp):
    async def scenario(session):
        empty_session = (await session.read_resource("memory://sessions/latest")).contents[0]
        seeded = await _seed(session)
        await session.call_tool("save_session", {"summary": GOOD_SUMMARY})
        out = {"empty_session": empty_session, **seeded}
        for uri in (
            "memory://graph/summary",
            "memory://graph/integrity",
            "memory://episodes/recent",
            "memory://sessions/latest",
        ):
            out[uri] = (await session.read_resource(uri)).contents[0]
        return out

    out = mcp(scenario)
    assert "No session context returned" in out["empty_session"].text

    summary = json.loads(out["memory://graph/summary"].text)
    assert out["memory://graph/summary"].mime_type == "application/json"
    assert summary["entities"] == 3
    assert summary["facts"] == {
        "total": 1,
        "active": 1,
        "scheduled": 0,
        "superseded": 0,
        "retracted": 0,
    }
    assert summary["episodes"]["total"] == 2
    assert summary["episodes"]["by_category"]["invariant"] == 1
    assert summary["episodes"]["by_category"]["bug_root_cause"] == 1

    integrity = json.loads(out["memory://graph/integrity"].text)
    assert integrity["verified"] is True
    assert integrity["merkle_root"] == summary["merkle_root"]

    recent = json.loads(out["memory://episodes/recent"].text)
    assert {e["id"] for e in recent["episodes"]} == {out["episode"]["id"], out["bug"]["id"]}

    latest = out["memory://sessions/latest"].text
    assert latest.startswith("SESSION_CONTEXT: (trust=") and "Key files:" in latest
    record = InjectionRecord.objects.get()
    assert (record.channel, record.client, record.client_reported, record.source) == (
        "mcp",
        LOCAL_WRITE,
        CLIENT_NAME,
        "load",
    )
    assert record.system_prompt == latest


def test_recent_episodes_keeps_the_twenty_newest(mcp):
    async def scenario(session):
        for day in range(1, 23):
            await session.call_tool(
                "memory_record_episode",
                {
                    "title": f"note {day}",
                    "category": "session_note",
                    "content": f"day {day}",
                    "occurred_at": f"2026-03-{day:02d}T09:00:00Z",
                },
            )
        return (await session.read_resource("memory://episodes/recent")).contents[0].text

    recent = json.loads(mcp(scenario))
    assert recent["count"] == 20
    assert [e["title"] for e in recent["episodes"]] == [f"note {d}" for d in range(22, 2, -1)]


def test_prompts_are_assembled_from_compiled_memory(mcp):
    async def scenario(session):
        seeded = await _seed(session)
        briefing = await session.get_prompt(
            "architecture-briefing", {"component": "order_repository"}
        )
        bug = await session.get_prompt(
            "bug-investigation-context", {"symptom": "customers charged twice after a timeout"}
        )
        nothing = await session.get_prompt("session-resume", {})
        await session.call_tool("save_session", {"summary": GOOD_SUMMARY})
        resume = await session.get_prompt("session-resume", {})
        try:
            await session.get_prompt("session-resume", {"project": "nowhere"})
            missing = None
        except MCPError as exc:
            missing = str(exc)
        return seeded, briefing, bug, nothing, resume, missing

    seeded, briefing, bug, nothing, resume, missing = mcp(scenario)
    text = briefing.messages[0].content.text
    assert briefing.messages[0].role == "user"
    assert "order_repository" in text
    assert f"[FACT:{seeded['fact']['fact']['id']}]" in text
    assert seeded["episode"]["id"] in text

    bug_text = bug.messages[0].content.text
    assert "customers charged twice after a timeout" in bug_text
    assert seeded["bug"]["id"] in bug_text

    assert "no trusted saved session" in nothing.messages[0].content.text
    resumed = resume.messages[0].content.text
    assert "SESSION_CONTEXT: (trust=" in resumed and "memoryproject/mcp.py" in resumed
    assert missing and "no project 'nowhere'" in missing
