"""Throttling of failed authentication, per client address and per API key prefix.

Every door that checks an API key (REST, MCP over streamable HTTP) counts the keys it refuses
(unknown, wrong secret, revoked, expired, malformed) in Django's cache: after
``MEMORY_AUTH_FAILURES`` refusals within ``MEMORY_AUTH_FAILURE_WINDOW`` seconds from one address,
or for one key prefix, that address or prefix is answered 429 with ``Retry-After`` until the
window ends, before any key is looked at. The cache is the one ``CACHES`` configures: Redis
(shared by every worker and process) when ``REDIS_URL`` is set, else this process's memory.
A request without any key is not a failed authentication and is not counted.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.locmem import LocMemCache

KEY_PREFIX = "memoryproject:authfail"

#: Whether this process has counted a refused key. With the cache in this process's memory (no
#: REDIS_URL) no other process writes it, so until this process counts one there is no entry
#: to read, and the read every authenticated request made (four keys) is skipped.
_counted_here = threading.Event()


@dataclass(frozen=True)
class AuthLimits:
    failures: int
    window: int


def auth_limits() -> AuthLimits:
    return AuthLimits(
        failures=max(1, int(getattr(settings, "MEMORY_AUTH_FAILURES", 10))),
        window=max(1, int(getattr(settings, "MEMORY_AUTH_FAILURE_WINDOW", 300))),
    )


def key_prefix_of(raw_key: str) -> str:
    """The visible prefix of a presented key (what it claims to be), "" when none.

    The per-key bucket counts this prefix rather than the whole key: a key is looked up by its
    prefix and only the secret after it can be guessed, so every guess at one key shares one
    bucket, whatever secret or address it comes with. A bucket per whole key would count a
    subset of those attempts and stop none sooner. A key without a dot is its own prefix (its
    first 64 characters). An empty prefix (``.secret``) matches no key, as `api_key_verify`
    refuses it unread: such a key is counted per address only.
    """
    return raw_key.strip().partition(".")[0][:64]


def _buckets(address: str | None, prefix: str | None) -> list[str]:
    names = []
    if address:
        names.append(f"addr:{address}")
    if prefix:
        names.append(f"key:{prefix}")
    # Hashed: cache backends restrict key characters and length (memcached), and an attacker
    # chooses the prefix.
    return [f"{KEY_PREFIX}:{hashlib.sha256(n.encode()).hexdigest()[:32]}" for n in names]


def auth_retry_after(*, address: str | None, prefix: str | None) -> int | None:
    """Seconds until this address or key prefix may try again, or None when it may now."""
    if not _counted_here.is_set() and isinstance(caches["default"], LocMemCache):
        return None
    limits = auth_limits()
    now = time.time()
    wait = 0.0
    buckets = _buckets(address, prefix)
    # One read of every entry (one round trip to Redis): every authenticated request asks.
    held = cache.get_many([f"{b}:{part}" for b in buckets for part in ("start", "count")])
    for bucket in buckets:
        started = held.get(f"{bucket}:start")
        count = held.get(f"{bucket}:count") or 0
        if started is None or count < limits.failures:
            continue
        wait = max(wait, float(started) + limits.window - now)
    return max(1, math.ceil(wait)) if wait > 0 else None


def auth_failure_record(*, address: str | None, prefix: str | None) -> None:
    """Counts one refused key against the address and the key prefix it claimed."""
    _counted_here.set()
    window = auth_limits().window
    now = time.time()
    for bucket in _buckets(address, prefix):
        # The window starts at the first failure and ends ``window`` seconds later, when both
        # entries expire (add() never moves an existing entry's expiry).
        cache.add(f"{bucket}:start", now, timeout=window)
        cache.add(f"{bucket}:count", 0, timeout=window)
        try:
            cache.incr(f"{bucket}:count")
        except ValueError:  # expired between the two calls: a new window
            cache.add(f"{bucket}:count", 1, timeout=window)
