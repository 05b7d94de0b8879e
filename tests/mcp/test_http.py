"""Streamable HTTP: the same server on 127.0.0.1, guarded against DNS rebinding, reached with
an API key (see test_http_auth for the access rules)."""

from __future__ import annotations

import http.client
import socket

import pytest

from memoryproject.management.commands.mcp_serve import transport_security_for
from tests.mcp.conftest import INITIALIZE, structured, write_key

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _post(port: int, host_header: str, key: str, origin: str | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {
        "Authorization": f"Bearer {key}",
        "Host": host_header,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    if origin:
        headers["Origin"] = origin
    connection.request("POST", "/mcp", body=INITIALIZE, headers=headers)
    status = connection.getresponse().status
    connection.close()
    return status


def test_a_tool_call_over_streamable_http(mcp_http):
    async def scenario(session):
        written = await session.call_tool(
            "memory_upsert_fact",
            {"subject_id": "gateway", "predicate": "runs_on", "object_value": "k8s"},
        )
        compiled = await session.call_tool("memory_compile_context", {"query": "gateway runs on"})
        tools = await session.list_tools()
        return written, compiled, tools

    written, compiled, tools = mcp_http.run(scenario, key=write_key())
    assert structured(written)["fact"]["object_value"] == "k8s"
    assert "k8s" in structured(compiled)["markdown"]
    assert len(tools.tools) == 14
    from graph_app.models import TemporalFact

    assert TemporalFact.objects.filter(predicate="runs_on").count() == 1


def test_http_rejects_foreign_host_and_origin_headers(mcp_http):
    port, key = mcp_http.port, write_key()
    assert _post(port, f"127.0.0.1:{port}", key) == 200
    assert _post(port, f"localhost:{port}", key, origin=f"http://localhost:{port}") == 200
    assert _post(port, f"evil.example:{port}", key) == 421
    assert _post(port, f"127.0.0.1:{port}", key, origin="http://evil.example") == 403


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: this only picks a route
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_http_binds_loopback_only_by_default(mcp_http):
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to probe")
    with pytest.raises(OSError), socket.create_connection((address, mcp_http.port), timeout=2):
        pass
    with socket.create_connection(("127.0.0.1", mcp_http.port), timeout=2):
        pass


def test_transport_security_always_on_even_for_other_bind_addresses():
    public = transport_security_for("0.0.0.0", ["memory.internal"])
    assert public.enable_dns_rebinding_protection is True
    assert "memory.internal:*" in public.allowed_hosts
    assert not any(host.startswith("0.0.0.0") for host in public.allowed_hosts)
    lan = transport_security_for("10.0.0.5", [])
    assert "10.0.0.5:*" in lan.allowed_hosts and "http://10.0.0.5:*" in lan.allowed_origins
