"""Which client a request comes from when reverse proxies stand in front of the server.

A proxy opens its own connection to us, so the peer address of a proxied request is the
proxy's; the proxy says who its client was in ``X-Forwarded-For`` (appending the address it saw
to whatever the request already carried) and how it was reached in ``X-Forwarded-Proto``. Any
client can send those headers as well, so they are believed only from the peers
``TRUSTED_PROXIES`` lists (IP addresses or CIDR networks; empty, the default: from no one).

From a trusted peer the client is the rightmost hop of X-Forwarded-For that is not itself a
trusted proxy: every hop left of it was written by that client, who may have made it up. From
any other peer every forwarded header (X-Forwarded-For, -Proto, -Host, -Port, Forwarded,
X-Real-IP) is removed before the application sees the request, so nothing downstream (Django's
``SECURE_PROXY_SSL_HEADER``, a log line) can be fooled by it.

Only X-Forwarded-For names the client: it is what nginx, HAProxy, Caddy, Traefik, Envoy and the
cloud load balancers set. Reading ``Forwarded`` or ``X-Real-IP`` too would let a client forge
whichever of them the proxy does not set itself, since a proxy passes unknown headers through.

Both doors use `client_address`: `TrustedProxyMiddleware` (Django: REST, admin) rewrites
``REMOTE_ADDR``, `TrustedProxyHeaders` (ASGI: MCP over streamable HTTP, served by uvicorn with
its own proxy handling off) rewrites the scope's ``client``; failed-authentication throttling
then counts that address. The REST API's server (granian, memoryproject/server.py) reads no
forwarded header itself: ``REMOTE_ADDR`` is the TCP peer and the scheme is the connection's.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: The headers a proxy uses to speak for its client, lower-case as ASGI carries them.
FORWARDED_HEADERS = (
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "forwarded",
    "x-real-ip",
)
_META_NAMES = tuple("HTTP_" + name.upper().replace("-", "_") for name in FORWARDED_HEADERS)
_HEADER_NAMES = frozenset(name.encode() for name in FORWARDED_HEADERS)


def proxy_networks(items: Iterable[str]) -> tuple[Network, ...]:
    """The networks ``TRUSTED_PROXIES`` lists, or ValueError naming the entry it cannot read."""
    networks = []
    for item in items:
        text = item.strip()
        if text == "*":
            raise ValueError(
                "'*' would believe every client's forwarded headers; list the proxies' "
                "addresses or networks"
            )
        try:
            # Strict: 10.0.0.1/8 is a typo for 10.0.0.0/8, refused rather than guessed at.
            networks.append(ipaddress.ip_network(text))
        except ValueError:
            raise ValueError(
                f"{text!r} is not an IP address or a network (CIDR, e.g. 10.0.0.0/8)"
            ) from None
    return tuple(networks)


@functools.lru_cache(maxsize=8)
def _networks(items: tuple[str, ...]) -> tuple[Network, ...]:
    return proxy_networks(items)


def trusted_networks() -> tuple[Network, ...]:
    return _networks(tuple(getattr(settings, "TRUSTED_PROXIES", ())))


def _address(text: str) -> Address | None:
    """The IP address of one peer or hop (``1.2.3.4``, ``1.2.3.4:80``, ``2001:db8::1``,
    ``[2001:db8::1]:80``), an IPv4-mapped IPv6 address as IPv4; None when it is none."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # IPv4 with a port
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: Address, networks: tuple[Network, ...]) -> bool:
    return any(address in network for network in networks)


def is_trusted_proxy(peer: str) -> bool:
    address = _address(peer)
    return address is not None and _trusted(address, trusted_networks())


def client_address(
    peer: str, forwarded_for: str | None, *, networks: tuple[Network, ...] | None = None
) -> str:
    """The address of the client a request comes from: ``peer`` (the connection's address)
    unless it is a trusted proxy; then the rightmost hop of ``forwarded_for`` (X-Forwarded-For,
    every occurrence joined by commas) that is not a trusted proxy, or the leftmost when all
    are. A hop that is not an address stops the walk at the last trusted one, which then
    stands for its clients: a proxy never writes such a hop, so a client did."""
    trusted = trusted_networks() if networks is None else networks
    address = _address(peer)
    if address is None or not _trusted(address, trusted):
        return peer
    for hop in reversed((forwarded_for or "").split(",")):
        if not hop.strip():
            continue
        hop_address = _address(hop)
        if hop_address is None:
            break
        address = hop_address
        if not _trusted(address, trusted):
            break
    return str(address)


class TrustedProxyMiddleware:
    """Django: from a trusted proxy, ``REMOTE_ADDR`` becomes the client it forwards for; from
    any other peer the forwarded headers are removed. First in MIDDLEWARE, so that the HTTPS
    redirect (``SECURE_PROXY_SSL_HEADER``) reads X-Forwarded-Proto from trusted proxies only."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        peer = str(meta.get("REMOTE_ADDR") or "")
        if is_trusted_proxy(peer):
            meta["REMOTE_ADDR"] = client_address(peer, meta.get("HTTP_X_FORWARDED_FOR"))
        else:
            for name in _META_NAMES:
                meta.pop(name, None)
        return self.get_response(request)


def _https_header() -> tuple[bytes, str] | None:
    """Django's ``SECURE_PROXY_SSL_HEADER`` (set by TRUST_X_FORWARDED_PROTO) as an ASGI header
    name and the value that means HTTPS."""
    setting = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not setting:
        return None
    name, value = setting
    return name.removeprefix("HTTP_").lower().replace("_", "-").encode(), value


def proxied_scope(scope: Scope) -> Scope:
    """An ASGI scope as `TrustedProxyMiddleware` leaves a Django request: from a trusted proxy
    the ``client`` it forwards for (and the scheme, when TRUST_X_FORWARDED_PROTO is on); from
    any other peer, the scope without forwarded headers."""
    client = scope.get("client")
    peer = str(client[0]) if client else ""
    headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
    if not is_trusted_proxy(peer):
        kept = [(name, value) for name, value in headers if name.lower() not in _HEADER_NAMES]
        return {**scope, "headers": kept} if len(kept) != len(headers) else scope
    forwarded = ",".join(
        bytes(value).decode("latin-1")
        for name, value in headers
        if name.lower() == b"x-forwarded-for"
    )
    changed: dict[str, Any] = dict(scope)
    address = client_address(peer, forwarded)
    if address != peer:
        changed["client"] = (address, 0)
    https = _https_header()
    if https is not None:
        sent = [bytes(v).decode("latin-1") for n, v in headers if n.lower() == https[0]]
        if sent:
            secure = sent[0].split(",", 1)[0].strip() == https[1]
            plain = "ws" if scope["type"] == "websocket" else "http"
            changed["scheme"] = plain + ("s" if secure else "")
    return changed


class TrustedProxyHeaders:
    """ASGI: `proxied_scope` for every HTTP and WebSocket request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = proxied_scope(scope)
        await self.app(scope, receive, send)
