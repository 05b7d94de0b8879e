"""A local reverse proxy that adds ``Authorization: Bearer $MEMORY_API_KEY`` to every request.

The MCP conformance suite's client sends no credentials, while ``mcp_serve`` over streamable
HTTP answers 401 to any request without an API key. CI puts this proxy between them:

    MEMORY_API_KEY=<key> python .ci/bearer_proxy.py LISTEN_PORT http://127.0.0.1:SERVER_PORT

Everything else passes through unchanged, including the Host and Origin headers (so the
DNS-rebinding checks still see what the client sent) and streamed (SSE) answers.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import httpx2
import uvicorn

HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-authorization",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"content-length",
    b"authorization",
}


def build(upstream: str, key: str) -> Any:
    client = httpx2.AsyncClient(timeout=None)
    bearer = f"Bearer {key}".encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
        headers.append((b"authorization", bearer))
        query = scope.get("query_string", b"").decode()
        url = upstream + scope["path"] + (f"?{query}" if query else "")
        request = client.build_request(scope["method"], url, headers=headers, content=body)
        response = await client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP
                    ],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    return app


if __name__ == "__main__":
    port, upstream = int(sys.argv[1]), sys.argv[2].rstrip("/")
    app = build(upstream, os.environ["MEMORY_API_KEY"])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
