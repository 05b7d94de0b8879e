"""`manage.py mcp_serve` loads its identity's compiler index in the background as soon as it
has checked the identity, beside the MCP SDK's import and the handshake, so the agent's first
compile finds it loaded (``--no-warm``: on the first compile instead). Read from the server's
log on stderr."""

from __future__ import annotations

import anyio
import pytest

from graph_app.fact_writes import fact_upsert

pytestmark = [pytest.mark.slow]

WARMED = "compiler indexes warmed in process"


def _facts(project):
    for service in ("ledger_store", "auth_service"):
        fact_upsert(
            project=project, subject_id="payment_service", predicate="depends_on",
            object_value=service,
        )  # fmt: skip


def test_the_index_is_loaded_as_the_server_starts_before_any_call(mcp, mcp_db):
    _facts(mcp_db)
    mcp.env = {**mcp.env, "LOG_LEVEL": "INFO"}

    async def scenario(session):
        with anyio.fail_after(60):
            while WARMED not in mcp.stderr():  # no call made yet
                await anyio.sleep(0.05)
        return await session.call_tool("memory_compile_context", {"query": "payment_service"})

    result = mcp(scenario, "--project", "default", "--scope", "read")
    assert not result.is_error
    assert "auth_service" in result.structured_content["markdown"]
    warmed = [line for line in mcp.stderr().splitlines() if WARMED in line]
    assert len(warmed) == 1 and "{'default': " in warmed[0]


def test_no_warm_leaves_the_index_to_the_first_compile(mcp, mcp_db):
    _facts(mcp_db)
    mcp.env = {**mcp.env, "LOG_LEVEL": "INFO"}

    async def scenario(session):
        return await session.call_tool("memory_compile_context", {"query": "payment_service"})

    result = mcp(scenario, "--project", "default", "--scope", "read", "--no-warm")
    assert not result.is_error
    assert WARMED not in mcp.stderr()
    assert "compiler index of project default built from" in mcp.stderr()
