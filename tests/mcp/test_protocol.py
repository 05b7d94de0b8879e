"""The server as an MCP client sees it: handshake, listings, errors, concurrency, stdout."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from tests.mcp.conftest import REPO, server_env, structured, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOOLS = {
    "save_session",
    "load_session",
    "plan_context",
    "memory_record_episode",
    "memory_upsert_fact",
    "memory_retract_fact",
    "memory_compile_context",
    "memory_query_entity",
    "memory_time_travel",
    "memory_verify_integrity",
    "memory_audit_contradictions",
    "memory_verify_audit",
    "memory_get_episode",
    "memory_get_fact",
}
RESOURCES = {
    "memory://graph/summary",
    "memory://graph/integrity",
    "memory://episodes/recent",
    "memory://sessions/latest",
}
PROMPTS = {
    "architecture-briefing": {"component"},
    "bug-investigation-context": {"symptom"},
    "session-resume": {"project"},
}


def test_initialize_names_the_server_and_offers_tools_resources_prompts(mcp):
    async def scenario(session):
        return session.initialize_result

    result = mcp(scenario)
    assert result.server_info.name == "memoryproject"
    assert result.server_info.version
    assert result.capabilities.tools is not None
    assert result.capabilities.resources is not None
    assert result.capabilities.prompts is not None
    assert "load_session" in (result.instructions or "")


def test_every_tool_is_listed_with_descriptions_bounds_and_output_schema(mcp):
    async def scenario(session):
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in mcp(scenario)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description) > 150, tool.name
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    compile_args = tools["memory_compile_context"].input_schema["properties"]
    assert (compile_args["max_tokens"]["minimum"], compile_args["max_tokens"]["maximum"]) == (
        64,
        32000,
    )
    assert tools["memory_query_entity"].input_schema["properties"]["max_hops"]["maximum"] == 5
    assert tools["plan_context"].input_schema["properties"]["mode"]["enum"] == [
        "auto",
        "force",
        "dry_run",
    ]
    assert tools["memory_record_episode"].input_schema["required"] == [
        "title",
        "category",
        "content",
    ]
    from graph_app.models import EpisodeCategory

    category = tools["memory_record_episode"].input_schema["properties"]["category"]
    assert category["enum"] == list(EpisodeCategory.values)
    assert tools["memory_verify_integrity"].annotations.read_only_hint is True
    assert tools["memory_verify_audit"].annotations.read_only_hint is True
    assert tools["memory_upsert_fact"].annotations.read_only_hint is False


def test_every_resource_and_prompt_is_listed(mcp):
    async def scenario(session):
        return (await session.list_resources()).resources, (await session.list_prompts()).prompts

    resources, prompts = mcp(scenario)
    assert {str(r.uri) for r in resources} == RESOURCES
    assert all(r.description for r in resources)
    listed = {p.name: {a.name for a in p.arguments or []} for p in prompts}
    assert listed == PROMPTS
    required = {p.name: [a.name for a in p.arguments or [] if a.required] for p in prompts}
    assert required == {
        "architecture-briefing": ["component"],
        "bug-investigation-context": ["symptom"],
        "session-resume": [],
    }


def test_ping(mcp):
    async def scenario(session):
        await session.send_ping()
        return True

    assert mcp(scenario)


def test_invalid_calls_return_is_error_and_the_server_keeps_serving(mcp):
    async def scenario(session):
        out_of_bounds = await session.call_tool(
            "memory_query_entity", {"entity_id": "x", "max_hops": 9}
        )
        bad_timestamp = await session.call_tool("memory_time_travel", {"as_of": "2026-02-01"})
        domain = await session.call_tool("memory_retract_fact", {"fact_id": "fact_missing"})
        bad_category = await session.call_tool(
            "memory_record_episode", {"title": "t", "category": "rumour", "content": "c"}
        )
        unknown = await session.call_tool("no_such_tool", {})
        after = await session.call_tool("memory_verify_integrity", {})
        return out_of_bounds, bad_timestamp, domain, bad_category, unknown, after

    out_of_bounds, bad_timestamp, domain, bad_category, unknown, after = mcp(scenario)
    assert out_of_bounds.is_error and "max_hops" in text_of(out_of_bounds)
    assert bad_timestamp.is_error and "as_of" in text_of(bad_timestamp)
    assert "timezone" in text_of(bad_timestamp)
    assert domain.is_error and "fact_id: no fact 'fact_missing'" in text_of(domain)
    assert bad_category.is_error and "category" in text_of(bad_category)
    assert unknown.is_error
    assert structured(after)["verified"] is True


def test_a_bad_write_writes_nothing(mcp):
    from graph_app.models import Entity, Episode

    async def scenario(session):
        return await session.call_tool(
            "memory_record_episode",
            {
                "title": "Broken",
                "category": "adr",
                "content": "x",
                "entities_mentioned": ["fresh_entity"],
                "occurred_at": "yesterday",
            },
        )

    result = mcp(scenario)
    assert result.is_error and "occurred_at" in text_of(result)
    assert not Episode.objects.exists()
    assert not Entity.objects.filter(slug="fresh_entity").exists()


def test_twenty_concurrent_tool_calls_all_succeed(mcp):
    async def scenario(session):
        results: list = [None] * 20

        async def call(i: int) -> None:
            if i % 2:
                results[i] = await session.call_tool(
                    "memory_upsert_fact",
                    {
                        "subject_id": f"service_{i}",
                        "predicate": "owned_by",
                        "object_value": f"team_{i}",
                    },
                )
            else:
                results[i] = await session.call_tool("memory_verify_integrity", {})

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(call, i)
        return results

    results = mcp(scenario)
    assert [r.is_error for r in results] == [False] * 20, [text_of(r) for r in results]
    for i in range(1, 20, 2):
        assert structured(results[i])["fact"]["object_value"] == f"team_{i}"
    from graph_app.models import TemporalFact

    assert TemporalFact.objects.filter(predicate="owned_by", valid_until__isnull=True).count() == 10


def test_stdout_carries_only_protocol_messages(mcp_db, tmp_path):
    """Every line the server writes to stdout is a JSON-RPC message, warnings or not."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_retract_fact", "arguments": {"fact_id": "nope"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "resources/read",
            "params": {"uri": "memory://graph/summary"},
        },
    ]
    stderr_path = tmp_path / "stderr.log"
    errlog = stderr_path.open("w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_serve", "--scope", "write", "--log-level", "DEBUG"],
        cwd=REPO,
        env={**server_env(), "PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "always"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        text=True,
    )
    seen: dict[int, dict] = {}
    lines: list[str] = []
    try:
        assert process.stdin and process.stdout
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            if "id" not in message:
                continue
            while message["id"] not in seen:
                line = process.stdout.readline()
                assert line, f"server closed stdout early:\n{stderr_path.read_text()}"
                lines.append(line)
                parsed = json.loads(line)
                assert parsed.get("jsonrpc") == "2.0"
                if "id" in parsed:
                    seen[parsed["id"]] = parsed
    finally:
        if process.stdin:
            process.stdin.close()
        process.wait(timeout=15)
        errlog.close()
    rest = process.stdout.read() if process.stdout else ""
    for line in [*lines, *rest.splitlines()]:
        if line.strip():
            assert json.loads(line)["jsonrpc"] == "2.0"
    assert seen[3]["result"]["isError"] is True
    assert "contents" in seen[4]["result"]
    # DEBUG logging was on: it all went to stderr (the failed tool call is logged there).
    assert "memory_retract_fact" in stderr_path.read_text()


def test_database_connections_are_closed_after_each_call(mcp):
    """Worker threads must not keep connections open between calls (PostgreSQL shows them)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("open connections are only observable on PostgreSQL (pg_stat_activity)")
    connection.close()

    def others_connected() -> int:
        from django.db import connection as thread_connection

        try:
            with thread_connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                return int(cursor.fetchone()[0])
        finally:
            thread_connection.close()

    async def scenario(session):
        async def call(i: int) -> None:
            result = await session.call_tool(
                "memory_upsert_fact",
                {"subject_id": f"svc_{i}", "predicate": "tier", "object_value": "gold"},
            )
            assert not result.is_error, text_of(result)

        for _ in range(2):
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(call, i)
        await session.call_tool("memory_verify_integrity", {})
        return await anyio.to_thread.run_sync(others_connected)

    assert mcp(scenario) == 0
