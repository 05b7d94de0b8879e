"""The MCP server in one process: agents reach the same services as REST through the Model
Context Protocol.

`build_server()` gathers every installed app's tools, resources and prompts into a registry
(memoryproject.mcp_calls), publishes its manifest with the SDK (memoryproject.mcp_server) and
answers each call in place. `manage.py mcp_serve` serves it over streamable HTTP, and over
stdio with ``--one-process``; by default a stdio server runs the SDK and the registry in two
processes side by side (memoryproject.mcp_split), with the same two halves.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from memoryproject.mcp_auth import ApiKeyVerifier, auth_settings
from memoryproject.mcp_calls import call_run, manifest, registry_build
from memoryproject.mcp_server import LogLevel, MemoryServer, server_build
from memoryproject.projects import LocalIdentity

__all__ = ["LogLevel", "build_server"]


def build_server(
    *,
    default_project: str | None = None,
    log_level: LogLevel = "WARNING",
    api_key: str | None = None,
    local: LocalIdentity | None = None,
    http_url: str | None = None,
) -> MemoryServer:
    """The MCP server with every app's tools, resources and prompts registered.

    Over stdio it acts as ``api_key`` or ``local``; with ``http_url`` (the streamable HTTP
    endpoint) every request must carry a bearer API key instead."""
    auth: dict[str, Any] = {}
    if http_url is not None:
        auth = {"token_verifier": ApiKeyVerifier(), "auth": auth_settings(http_url)}
        api_key, local = None, None
    registry = registry_build(default_project=default_project, api_key=api_key, local=local)
    server = server_build(
        manifest(registry), partial(call_run, registry), log_level=log_level, **auth
    )
    server.registry = registry
    return server
