"""Canonical hashing of injection records: RFC 8785 JSON, SHA-256, linked by prev_hash.

The hashed payload names every field that a reviewer relies on. The prompt is represented by
its SHA-256 (itself recomputed from the stored text on verification), so the chain hash does not
depend on how a database stores long text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import rfc8785

HASHED_FIELDS = (
    "seq",
    "project_id",
    "source",
    "channel",
    "client",
    "status",
    "decision",
    "trust_score",
    "threshold",
    "mode",
    "trace_ids",
    "prompt_sha256",
    "generated_at",
    "created_at",
    "prev_hash",
)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_hash(payload: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the hashed fields (timestamps as ISO strings)."""
    canonical = rfc8785.dumps({name: payload[name] for name in HASHED_FIELDS})
    return hashlib.sha256(canonical).hexdigest()
