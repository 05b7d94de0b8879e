"""Flagged memory never reaches an agent through any MCP door, and every delivered item is
spotlighted: the REST matrix of ``tests/security/test_quarantine_doors.py`` through the real
``mcp_serve`` and the SDK's client (tools, resources and prompts), every injection family and
every secret form of the screening corpus at once."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from graph_app.episode_writes import episode_record
from memoryproject.domain.spotlight import QUARANTINE_HEADING
from tests.mcp.conftest import structured, text_of
from tests.security.test_quarantine_doors import (
    CLEAN_DECISION,
    CORPUS,
    FAMILIES,
    _leaks,
    _plant,
    _probe,
)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# --- MCP --------------------------------------------------------------------------------------


async def _mcp_answers(session, ids: dict[str, list[str]]) -> dict[str, str]:
    answers: dict[str, str] = {}

    async def tool(door: str, name: str, arguments: dict[str, Any]) -> None:
        result = await session.call_tool(name, arguments)
        answers[door] = text_of(result) + "\n" + _json(structured(result))

    await tool("plan_context force", "plan_context", {"mode": "force"})
    await tool("plan_context auto", "plan_context", {"mode": "auto"})
    await tool("load_session", "load_session", {})
    await tool("memory_compile_context", "memory_compile_context", {"query": "ledger tenancy"})
    await tool("memory_query_entity", "memory_query_entity", {"entity_id": "ledger"})
    await tool("memory_time_travel", "memory_time_travel", {"as_of": "2999-01-01T00:00:00Z"})
    for episode_id in ids["episode"]:
        await tool(f"episode {episode_id}", "memory_get_episode", {"episode_id": episode_id})
    for fact_id in ids["fact"]:
        await tool(f"fact {fact_id}", "memory_get_fact", {"fact_id": fact_id})
    for uri in ("memory://episodes/recent", "memory://sessions/latest"):
        contents = (await session.read_resource(uri)).contents
        answers[uri] = "\n".join(getattr(c, "text", "") for c in contents)
    prompts = {
        "architecture-briefing": {"component": "ledger"},
        "bug-investigation-context": {"symptom": "ledger tenancy note"},
        "session-resume": {},
    }
    for name, arguments in prompts.items():
        prompt = await session.get_prompt(name, arguments)
        answers[name] = "\n".join(m.content.text for m in prompt.messages)
    return answers


@pytest.mark.django_db(transaction=True)
def test_mcp_doors_deliver_no_probe_of_any_family_and_no_secret(mcp, mcp_db):
    probes = [_probe(family) for family in FAMILIES]
    ids = _plant(mcp_db, probes)
    secrets = list(CORPUS.secrets)
    for n, secret in enumerate(secrets):
        episode_record(
            project=mcp_db,
            title=f"Ledger credentials {n}",
            category="incident",
            content=f"Ledger tenancy. {secret.text}",
        )
    answers = mcp(lambda session: _mcp_answers(session, ids))
    leaks = {}
    for family, probe in zip(FAMILIES, probes, strict=True):
        found = {door: _leaks([text], [probe]) for door, text in answers.items()}
        found = {door: pieces for door, pieces in found.items() if pieces}
        if found:
            leaks[family] = found
    assert not leaks
    clear = {s.form: [d for d, t in answers.items() if s.secret in t] for s in secrets}
    assert not any(clear.values()), clear

    # The flagged items are named, the clean ones delivered between the marks.
    compiled = answers["memory_compile_context"]
    assert QUARANTINE_HEADING in compiled and re.search(r"\[ADR:\S+\] «Ledger tenancy", compiled)
    assert all(f"QUARANTINED episode {i}" in answers[f"episode {i}"] for i in ids["episode"])
    assert all(f"QUARANTINED fact {i}" in answers[f"fact {i}"] for i in ids["fact"])
    assert f"«{CLEAN_DECISION}»" in answers["plan_context force"]
