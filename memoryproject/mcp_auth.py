"""MCP over streamable HTTP: the API key as a bearer token, and failed-authentication throttling.

The SDK's resource-server mode does the HTTP part: a request without ``Authorization: Bearer
<api key>``, or with a key that is unknown, revoked or expired, is answered 401 before any MCP
message is read. `ApiKeyVerifier` checks keys with the same `api_key_verify` as REST; the tools
then read the request's key (``get_access_token``) and resolve projects and scopes exactly as
REST does. `FailedAuthThrottle` wraps the whole app: refused keys count against the client
address and the key prefix (memoryproject.throttling), and past the limit the answer is 429
JSON with ``Retry-After``.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryproject.api_keys import KeyRefused, api_key_verify
from memoryproject.throttling import auth_failure_record, auth_retry_after, key_prefix_of


def _verify(token: str) -> AccessToken | None:
    close_old_connections()
    try:
        api_key = api_key_verify(token)
    except KeyRefused:
        return None
    finally:
        close_old_connections()
    return AccessToken(token=token, client_id=api_key.prefix, scopes=[str(api_key.scope)])


class ApiKeyVerifier:
    """The SDK's token verifier: a bearer token is valid when it is a valid API key."""

    async def verify_token(self, token: str) -> AccessToken | None:
        return await sync_to_async(_verify, thread_sensitive=False)(token)


def auth_settings(resource_url: str) -> AuthSettings:
    """Resource-server settings for ``resource_url`` (the MCP endpoint). Scopes are checked per
    tool against each operation's access, not here."""
    return AuthSettings(
        issuer_url=resource_url,  # type: ignore[arg-type]
        resource_server_url=resource_url,  # type: ignore[arg-type]
        required_scopes=None,
        validate_token_resource=False,
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class FailedAuthThrottle:
    """ASGI middleware: 429 for an address or key prefix past the failed-authentication
    limit; every 401 answered to a request that carried a key counts one failure. The address
    is the scope's client, which `memoryproject.proxies.TrustedProxyHeaders` (outside this)
    has made the forwarded client's when the peer is a trusted proxy."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = _header(scope, b"authorization") if scope["type"] == "http" else None
        if header is None:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = str(client[0]) if client else ""
        prefix = key_prefix_of(header.strip().partition(" ")[2])
        wait = await sync_to_async(auth_retry_after, thread_sensitive=False)(
            address=address, prefix=prefix
        )
        if wait is not None:
            await _too_many(send, wait)
            return
        status: dict[str, Any] = {}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        if status.get("code") == 401:
            await sync_to_async(auth_failure_record, thread_sensitive=False)(
                address=address, prefix=prefix
            )


async def _too_many(send: Send, wait: int) -> None:
    body = json.dumps(
        {
            "code": "throttled",
            "message": "Too many failed authentications from this address or key. "
            f"Expected available in {wait} seconds.",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(wait).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
