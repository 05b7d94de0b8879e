"""The canonical form of an instant in hashed records: UTC, microseconds always, ``Z``
(``iso_utc``), and the readers that bring a raw datetime column (naive UTC text on SQLite, an
aware datetime on PostgreSQL) into it without a parse where they can. Every hashed record
(facts, episodes, entities, the change log, traces, summaries) writes its instants this way, so
equal instants always hash alike. Pure Python.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any


class UtcText(str):
    """An instant already written in ``iso_utc``'s form (made by ``utc_text``): verification
    reads instants stored as text straight into that form, and ``iso_utc`` passes it on."""

    __slots__ = ()


# How Django stores an aware datetime on SQLite: naive UTC text, microseconds when not zero.
_STORED_UTC = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?")


def stored_instant(value: Any) -> datetime | None:
    """A datetime column read raw, aware UTC: SQLite keeps naive UTC text, PostgreSQL answers
    aware datetimes. Text that is no timestamp (written behind the application's back) reads as
    None, as the ORM would read it, so the row's hash no longer matches."""
    if type(value) is str:
        try:  # "YYYY-MM-DD HH:MM:SS[.ffffff]" in UTC: one parse
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:
            pass
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def utc_text(value: Any) -> UtcText | None:
    """A datetime column read raw, in ``iso_utc``'s form: SQLite's stored text is rewritten
    without a parse (the same characters, ``T`` for the space, microseconds always, ``Z``);
    anything else is read by ``stored_instant`` first. A stored text no calendar has (a 30th of
    February) keeps its digits: either way its record no longer matches its hash."""
    if value is None:
        return None
    if type(value) is str and _STORED_UTC.fullmatch(value):
        fraction = "Z" if len(value) == 26 else ".000000Z"
        return UtcText(value[:10] + "T" + value[11:] + fraction)
    at = iso_utc(stored_instant(value))
    return None if at is None else UtcText(at)


def instant_of(value: datetime | str) -> datetime:
    """An instant as a datetime, from a datetime or from ``iso_utc``'s form."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def iso_utc(value: datetime | UtcText | None) -> str | None:
    if value is None:
        return None
    if type(value) is UtcText:
        return value
    assert isinstance(value, datetime)
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # Fixed width (always microseconds) so equal instants always serialise identically; a UTC
    # time's ISO form always ends in "+00:00".
    return value.isoformat(timespec="microseconds")[:-6] + "Z"
