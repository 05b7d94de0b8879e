"""MCP over streamable HTTP needs an API key, like REST: no key or a refused key is 401 before
any MCP message, revocation takes effect at once, receipts name the key (the client's own name
is kept beside it, labelled self-reported), and refused keys are throttled."""

from __future__ import annotations

import http.client
import json

import anyio
import pytest
from django.db import connection

from audit_app.models import InjectionRecord
from graph_app.models import TemporalFact
from memoryproject.models import ProjectAPIKey
from tests.mcp.conftest import INITIALIZE, key_label, structured, text_of, write_key

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _initialize(port: int, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    connection.request("POST", "/mcp", body=INITIALIZE, headers=headers)
    response = connection.getresponse()
    answer = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    connection.close()
    return answer


def test_no_key_wrong_key_and_revoked_key_get_401_before_any_mcp_message(mcp_http):
    port = mcp_http.port
    key = write_key()
    status, headers, _ = _initialize(port, None)
    assert status == 401 and headers["www-authenticate"].lower().startswith("bearer")
    assert _initialize(port, "Bearer abcdefgh.not-a-real-key")[0] == 401
    assert _initialize(port, f"Bearer {key.partition('.')[0]}.wrong-secret")[0] == 401
    assert _initialize(port, f"Bearer {key}")[0] == 200
    ProjectAPIKey.objects.filter(prefix=key.partition(".")[0]).update(revoked=True)
    assert _initialize(port, f"Bearer {key}")[0] == 401


def test_a_key_revoked_during_a_session_is_refused_at_its_next_call(mcp_http):
    key = write_key()
    prefix = key.partition(".")[0]

    def revoke() -> None:
        try:
            ProjectAPIKey.objects.filter(prefix=prefix).update(revoked=True)
        finally:
            connection.close()

    async def scenario(session):
        first = await session.call_tool("memory_verify_integrity", {})
        await anyio.to_thread.run_sync(revoke)
        try:
            second = await session.call_tool(
                "memory_upsert_fact",
                {"subject_id": "svc", "predicate": "lang", "object_value": "go"},
            )
        except Exception as exc:  # the transport refuses the request itself (401)
            return first, str(exc) or type(exc).__name__
        return first, text_of(second) if second.is_error else "accepted"

    first, second = mcp_http.run(scenario, key=key)
    assert structured(first)["verified"] is True
    assert second != "accepted"
    assert not TemporalFact.objects.exists()


def test_receipts_name_the_key_and_keep_the_clients_claim_apart(mcp_http):
    key = write_key()

    async def scenario(session):
        return await session.call_tool("memory_compile_context", {"query": "anything"})

    claim = "api_key:mFDyNsMo (bootstrap write key)"
    result = mcp_http.run(scenario, client_name=claim, key=key)
    record = InjectionRecord.objects.get(pk=structured(result)["injection_id"])
    assert (record.channel, record.client, record.client_reported) == (
        "mcp",
        key_label(key),
        claim,
    )


def test_thirty_bad_keys_in_a_row_get_429_with_retry_after(mcp_http):
    port = mcp_http.port
    statuses = []
    for i in range(30):
        status, headers, body = _initialize(port, f"Bearer guess{i:03d}.not-the-secret")
        statuses.append(status)
    # The default limit is 10 failures per address (and per key prefix) in 300 s.
    assert statuses[:10] == [401] * 10
    assert set(statuses[10:]) == {429}
    assert 1 <= int(headers["retry-after"]) <= 300
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["code"] == "throttled"
    # While the address is blocked, even a valid key waits: guessing stays slow.
    assert _initialize(port, f"Bearer {write_key()}")[0] == 429
    # A request without a key is not a failed authentication: it still gets its 401.
    assert _initialize(port, None)[0] == 401


def test_resources_read_the_default_project_of_the_requests_key(mcp_http):
    key = write_key(("beta",))

    async def scenario(session):
        return (await session.read_resource("memory://graph/summary")).contents[0].text

    assert json.loads(mcp_http.run(scenario, key=key))["project"] == "beta"
