"""Timestamps in and out: timezone-aware UTC everywhere.

Inputs are ISO-8601 with a timezone (``2026-04-20T00:00:00Z`` or ``+02:00``); a naive or
malformed one is an ApplicationError naming the field. Outputs are ISO-8601 in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime


class TimestampError(ValueError):
    """A timestamp input that breaks the rule; its text is the rule, without the field."""


def to_utc(value: object) -> datetime:
    """``value`` (an ISO-8601 string with a timezone, or an aware datetime) in UTC."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(
                text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
            )
        except ValueError:
            raise TimestampError(
                f"'{value}' is not an ISO-8601 timestamp (e.g. 2026-04-20T09:30:00Z)"
            ) from None
    else:
        raise TimestampError(f"must be an ISO-8601 timestamp string, got {type(value).__name__}")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise TimestampError(f"'{value}' has no timezone; add one, e.g. 'Z' or '+00:00'")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise TimestampError(f"'{value}' is outside the range of representable times") from None


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a 'Z' suffix, or None."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def utcnow() -> datetime:
    return datetime.now(UTC)


def human_utc(value: datetime | None) -> str:
    """``2026-11-30 16:00:12 UTC``: to the second, for titles people read ("" for None)."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
