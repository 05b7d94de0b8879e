"""Which facts are valid when: the filters of the facts valid at an instant, now, or at an instant
as they were known at a transaction time (the API's filters, the contradiction audit, the ego
graph, time travel and the graph summary read through them).
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

from memoryproject.timeutil import utcnow


def valid_at(at: datetime) -> Q:
    """Facts valid at instant ``at`` (valid time, as recorded now)."""
    return Q(valid_from__lte=at) & (Q(valid_until__isnull=True) | Q(valid_until__gt=at))


def valid_now() -> Q:
    """Facts valid at this instant: the current truth (a scheduled fact is not yet, a fact
    whose successor is due later still is)."""
    return valid_at(utcnow())


def valid_as_known(as_of: datetime, known_at: datetime) -> Q:
    """Facts valid at ``as_of`` as they were known at transaction time ``known_at``: recorded
    by then, and open then (a closure recorded after ``known_at`` had not happened yet)."""
    return Q(recorded_at__lte=known_at, valid_from__lte=as_of) & (
        Q(valid_until__isnull=True) | Q(valid_until__gt=as_of) | Q(closed_at__gt=known_at)
    )
