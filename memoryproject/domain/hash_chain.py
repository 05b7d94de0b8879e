"""What the two hash chains (the injection log and the graph change log) share: the hash the
first entry links to, and the HMAC that signs a checkpoint of a chain's head.

A checkpoint body is signed as the HMAC-SHA256 of its RFC 8785 canonical JSON, with a key kept
outside the database (``memoryproject.checkpoint_key``). Pure Python.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

import rfc8785

#: The ``prev_hash`` of a chain's first entry.
GENESIS_HASH = "0" * 64


def checkpoint_mac(body: Mapping[str, Any], key: str) -> str:
    """HMAC-SHA256 of the checkpoint body's canonical JSON."""
    return hmac.new(key.encode("utf-8"), rfc8785.dumps(dict(body)), hashlib.sha256).hexdigest()


def checkpoint_mac_matches(body: Mapping[str, Any], mac: str, key: str) -> bool:
    try:
        expected = checkpoint_mac(body, key)
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, str(mac))
