"""Canonical forms of traces and saved summaries: what a receipt's content hash covers.

A receipt names every trace or summary it delivered with the SHA-256 of its canonical JSON
(RFC 8785, the graph's hashing), so an auditor can tell later whether the source changed or
was erased since. Every field that shaped the delivered context is in the form. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memoryproject.domain.hashing import record_sha256
from memoryproject.domain.instants import iso_utc


def trace_canonical(
    *,
    trace_id: str,
    project: str,
    created_at: datetime,
    model: str,
    policy: str,
    decision: str,
    trust_score: float,
    risk: float,
    status_code: int | None,
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "type": "trace",
        "id": str(trace_id),
        "project": project,
        "created_at": iso_utc(created_at),
        "model": model,
        "policy": policy,
        "decision": decision,
        "trust_score": float(trust_score),
        "risk": float(risk),
        "status_code": status_code,
        "metadata": dict(metadata),
    }


def summary_canonical(
    *,
    trace_id: str,
    project: str,
    summary: str,
    tokens: int,
    trust_score: float,
    risk: float,
    decision: str,
    created_at: datetime,
) -> dict[str, Any]:
    return {
        "type": "summary",
        "id": str(trace_id),
        "project": project,
        "summary": summary,
        "tokens": tokens,
        "trust_score": float(trust_score),
        "risk": float(risk),
        "decision": decision,
        "created_at": iso_utc(created_at),
    }


def content_sha256(canonical: Mapping[str, Any]) -> str:
    """SHA-256 of a canonical form, as receipts record it."""
    return record_sha256(dict(canonical))
