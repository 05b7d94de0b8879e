"""Where a new fact goes in the history of its (subject, predicate): pure rules, no storage.

For a singular predicate at most one fact is active. Given the facts already recorded for the
pair, a new assertion is one of:

- ``unchanged``: it repeats the active fact (same object) from a time at or after the active
  fact's start, or repeats a recorded fact exactly (same object and start), so nothing new is
  learned and no row is written;
- ``history``: some recorded fact starts later than it, so it is history: it is closed at the
  start of the next fact (its successor) and does not replace the current truth;
- ``active``: it becomes the active fact, closing the current active one (if any) at its own
  ``valid_from`` (a ``valid_from`` in the future schedules the change: see ``fact_status``);
- ``same_start``: it would replace the active fact from the very instant that one starts,
  leaving it a zero-width interval: refused (retract the active fact, or state a later start).

Non-singular predicates keep several active values: only an identical active value is
``unchanged``; anything else is simply added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Outcome = Literal["unchanged", "history", "active", "same_start"]
Status = Literal["scheduled", "active", "superseded", "retracted"]


def fact_status(
    *, valid_from: datetime, valid_until: datetime | None, superseded: bool, at: datetime
) -> Status:
    """What a fact is at instant ``at``: ``scheduled`` before it starts, ``active`` while it
    holds (a closure due later does not end it early), then ``superseded`` or ``retracted``.

    The current truth is always the fact valid now: a future-dated fact is recorded as the
    successor of the active one but takes over only when its time comes, with no write."""
    if valid_from > at:
        return "scheduled"
    if valid_until is None or valid_until > at:
        return "active"
    return "superseded" if superseded else "retracted"


@dataclass(frozen=True)
class ChainFact:
    id: str
    object_value: str
    object_entity: str | None
    valid_from: datetime
    valid_until: datetime | None
    recorded_at: datetime
    retracted: bool = False  # closed without a successor


@dataclass(frozen=True)
class Placement:
    outcome: Outcome
    existing_id: str | None = None  # the identical active fact (unchanged)
    # The fact to close at the new valid_from: the active one (active), or one whose closure
    # was only scheduled and which the new fact now replaces earlier (history).
    close_id: str | None = None
    successor_id: str | None = None  # the next fact (history)
    valid_until: datetime | None = None  # the new fact's own end (history)


def _same_object(fact: ChainFact, object_value: str, object_entity: str | None) -> bool:
    return fact.object_value == object_value and fact.object_entity == object_entity


def place_fact(
    chain: Sequence[ChainFact],
    *,
    object_value: str,
    object_entity: str | None,
    valid_from: datetime,
    singular: bool,
    now: datetime | None = None,
) -> Placement:
    """Decides the new fact's place among ``chain`` (every fact of its subject and predicate
    that is open, ends after ``valid_from`` or starts at or after it).

    A closure in the past is history and never rewritten; a closure still to come (after
    ``now``, set by a scheduled successor) is a plan: a new fact starting before it takes over
    from the fact it ends, which is closed at the new fact's start instead."""
    active = [f for f in chain if f.valid_until is None]
    if not singular:
        for fact in active:
            if _same_object(fact, object_value, object_entity) and fact.valid_from <= valid_from:
                return Placement("unchanged", existing_id=fact.id)
        return Placement("active")

    current = min(active, key=lambda f: (f.valid_from, f.recorded_at)) if active else None
    if (
        current is not None
        and _same_object(current, object_value, object_entity)
        and current.valid_from <= valid_from
    ):
        return Placement("unchanged", existing_id=current.id)

    for fact in chain:
        # A retracted fact asserted again is news (it is true again), not a repeat.
        if (
            not fact.retracted
            and fact.valid_from == valid_from
            and _same_object(fact, object_value, object_entity)
        ):
            return Placement("unchanged", existing_id=fact.id)

    if current is not None and current.valid_from == valid_from:
        return Placement("same_start", existing_id=current.id)

    later = [f for f in chain if f.valid_from > valid_from]
    if later:
        successor = min(later, key=lambda f: (f.valid_from, f.recorded_at, f.id))
        planned = [
            f
            for f in chain
            if not f.retracted
            and f.valid_until is not None
            and f.valid_from < valid_from < f.valid_until
            and (now is None or f.valid_until > now)
        ]
        return Placement(
            "history",
            successor_id=successor.id,
            valid_until=successor.valid_from,
            close_id=planned[0].id if planned else None,
        )
    return Placement("active", close_id=current.id if current else None)
