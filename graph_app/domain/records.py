"""Canonical forms of facts and episodes: what their SHA-256 covers.

Every field that carries meaning is in the form, validity and transaction time included, so a
change to any of them behind the application's back no longer matches the stored hash. The
change-tracking ``revision`` is bookkeeping and deliberately left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from graph_app.domain.hashing import record_sha256


def iso_utc(value: datetime | None) -> str | None:
    if value is None:
        return None
    # Fixed width (always microseconds) so equal instants always serialise identically.
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def fact_canonical(
    *,
    id: str,
    project: str,
    subject: str,
    predicate: str,
    object_value: str,
    object_entity: str | None,
    singular: bool,
    confidence: float,
    valid_from: datetime,
    valid_until: datetime | None,
    recorded_at: datetime,
    closed_at: datetime | None,
    superseded_by: str | None,
    source_episode: str | None,
) -> dict[str, Any]:
    return {
        "type": "fact",
        "id": id,
        "project": project,
        "subject": subject,
        "predicate": predicate,
        "object_value": object_value,
        "object_entity": object_entity,
        "singular": bool(singular),
        "confidence": float(confidence),
        "valid_from": iso_utc(valid_from),
        "valid_until": iso_utc(valid_until),
        "recorded_at": iso_utc(recorded_at),
        "closed_at": iso_utc(closed_at),
        "superseded_by": superseded_by,
        "source_episode": source_episode,
    }


def closure_known(closed_at: datetime | None, known_at: datetime) -> bool:
    """Whether a fact's closure (recorded at ``closed_at``) was known at ``known_at``."""
    return closed_at is not None and closed_at <= known_at


def fact_as_known_at(
    canonical: Mapping[str, Any], *, closed_at: datetime | None, known_at: datetime
) -> dict[str, Any]:
    """The canonical form as it read at transaction time ``known_at``.

    A closure recorded after ``known_at`` had not happened yet, so the fact was still open.
    """
    seen = dict(canonical)
    if closed_at is not None and not closure_known(closed_at, known_at):
        seen.update(valid_until=None, closed_at=None, superseded_by=None)
    return seen


def episode_canonical(
    *,
    id: str,
    project: str,
    category: str,
    title: str,
    content: str,
    files_touched: Sequence[str],
    entities_mentioned: Sequence[str],
    metadata: Mapping[str, Any],
    occurred_at: datetime,
    recorded_at: datetime,
    external_id: str | None,
) -> dict[str, Any]:
    return {
        "type": "episode",
        "id": id,
        "project": project,
        "category": category,
        "title": title,
        "content": content,
        "files_touched": list(files_touched),
        "entities_mentioned": list(entities_mentioned),
        "metadata": dict(metadata),
        "occurred_at": iso_utc(occurred_at),
        "recorded_at": iso_utc(recorded_at),
        "external_id": external_id,
    }


def sha256_of(canonical: Mapping[str, Any]) -> str:
    return record_sha256(dict(canonical))
