"""The bi-temporal visibility rule as ORM filters: the facts (and episodes) visible at a valid
time as known at a transaction time. The API's filters, the contradiction audit, the ego graph,
time travel, the graph summary and the entity page read through these; the rule and its Python
and numpy form are ``graph_app.domain.visibility`` (a test holds both to the same answers).
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

from memoryproject.timeutil import utcnow


def fact_visible(as_of: datetime, known_at: datetime | None = None) -> Q:
    """Facts visible at valid time ``as_of`` as known at transaction time ``known_at``:
    recorded by then, started by ``as_of`` and not ended by it as then known (a closure
    recorded after ``known_at`` had not happened yet). ``known_at`` None: as recorded now
    (valid time alone: ``valid_from <= as_of < valid_until``)."""
    started = Q(valid_from__lte=as_of)
    open_then = Q(valid_until__isnull=True) | Q(valid_until__gt=as_of)
    if known_at is None:
        return started & open_then
    return Q(recorded_at__lte=known_at) & started & (open_then | Q(closed_at__gt=known_at))


def fact_visible_now() -> Q:
    """Facts valid at this instant: the current truth (a scheduled fact is not yet, a fact
    whose successor is due later still is)."""
    return fact_visible(utcnow())


def episode_visible(as_of: datetime | None = None, known_at: datetime | None = None) -> Q:
    """Episodes that had occurred by ``as_of`` and been recorded by ``known_at`` (either None:
    no bound)."""
    visible = Q()
    if as_of is not None:
        visible &= Q(occurred_at__lte=as_of)
    if known_at is not None:
        visible &= Q(recorded_at__lte=known_at)
    return visible
