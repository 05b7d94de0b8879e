"""The bi-temporal visibility rule, evaluated in Python and numpy.

A fact holds in valid time ``[valid_from, valid_until)`` and was known in transaction time
from ``recorded_at``; ``closed_at`` is when its closure (the ``valid_until`` it got) was
recorded. At valid time ``as_of`` as known at transaction time ``known_at`` a fact is visible
when it had been recorded by then, had started by ``as_of``, and had not ended by ``as_of`` as
then known (a closure recorded after ``known_at`` had not happened yet):

    recorded_at <= known_at  and  valid_from <= as_of
    and  (as_of < valid_until  or  known_at < closed_at)

An episode is visible when it had occurred by ``as_of`` and been recorded by ``known_at``.

``graph_app.visibility`` writes the same rule as ORM filters (NULL for an open end);
here times are POSIX seconds with open ends infinite (``valid_until`` +inf while a fact is open;
a fact never closed is open, so either infinity may stand for its ``closed_at``). Every argument
may be a number or a numpy array (the operators are element-wise), so time travel's timeline
columns, the compiler's visibility columns and the ego graph's edge columns evaluate the rule
over whole columns at once. A test checks both writings agree on a grid of cases.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, TypeVar

T = TypeVar("T")


def posix_seconds(value: datetime | None, absent: float) -> float:
    """An instant as POSIX seconds; ``absent`` (an infinity) for an open end."""
    return absent if value is None else value.timestamp()


def valid_at(valid_from: Any, valid_until: Any, at: Any) -> Any:
    """Valid time alone (as recorded now): ``valid_from <= at < valid_until``."""
    return (valid_from <= at) & (at < valid_until)


def fact_visible(
    valid_from: Any,
    valid_until: Any,
    recorded_at: Any,
    closed_at: Any,
    *,
    as_of: Any,
    known_at: Any = math.inf,
) -> Any:
    """Whether a fact is visible at valid time ``as_of`` as known at ``known_at`` (default:
    as recorded now, every closure known)."""
    return (
        (recorded_at <= known_at)
        & (valid_from <= as_of)
        & ((as_of < valid_until) | (known_at < closed_at))
    )


def episode_visible(occurred_at: Any, recorded_at: Any, *, as_of: Any, known_at: Any) -> Any:
    """Whether an episode is visible at valid time ``as_of`` as known at ``known_at``."""
    return (occurred_at <= as_of) & (recorded_at <= known_at)
