"""What the two hash chains (the injection log and the graph change log) share: the hash the
first entry links to, and the HMAC that signs a checkpoint of a chain's head.

A checkpoint body is signed as the HMAC-SHA256 of its canonical JSON (RFC 8785), with a key kept
outside the database (``memoryproject.checkpoint_key``). Pure Python.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from memoryproject.domain.canonical import CanonicalizationError, canonical_json

#: The ``prev_hash`` of a chain's first entry.
GENESIS_HASH = "0" * 64


def checkpoint_mac(body: Mapping[str, Any], key: str) -> str:
    """HMAC-SHA256 of the checkpoint body's canonical JSON."""
    return hmac.new(key.encode("utf-8"), canonical_json(dict(body)), hashlib.sha256).hexdigest()


def checkpoint_mac_matches(body: Mapping[str, Any], mac: str, key: str) -> bool:
    try:
        expected = checkpoint_mac(body, key)
    except (CanonicalizationError, TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, str(mac))
