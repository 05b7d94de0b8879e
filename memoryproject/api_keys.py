"""The check of a presented API key, shared by every door: REST (memoryproject.auth), MCP over
streamable HTTP (memoryproject.mcp_auth) and over stdio (memoryproject.mcp). It imports no
REST framework, so the MCP server loads none."""

from __future__ import annotations

from memoryproject.models import ProjectAPIKey
from memoryproject.projects import key_with_projects


class KeyRefused(Exception):
    """A presented API key that does not authenticate; the message says why."""


def api_key_verify(key: str) -> ProjectAPIKey:
    """The valid, unrevoked, unexpired key ``key`` is, or `KeyRefused` saying why not."""
    key = key.strip()
    prefix, dot, secret = key.partition(".")
    if not dot or not prefix or not secret:
        raise KeyRefused("Unknown API key.")
    api_key = key_with_projects(prefix)
    if api_key is None or not api_key.is_valid(key):
        raise KeyRefused("Unknown API key.")
    if api_key.revoked:
        raise KeyRefused("This API key has been revoked.")
    if api_key.has_expired:
        raise KeyRefused("This API key has expired.")
    return api_key
