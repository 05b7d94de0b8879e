"""The bi-temporal visibility rule is written twice, as ORM filters (graph_app.visibility) and
over numbers and numpy columns (graph_app.domain.visibility): both give the same answer on a
grid of facts and episodes, open and closed, at every valid and transaction time around them,
boundaries included; time travel's timeline columns answer the same."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from graph_app.domain import visibility as rule
from graph_app.models import Entity, Episode, TemporalFact
from graph_app.timeline_columns import FactLine, TimelineColumns
from graph_app.visibility import episode_visible, fact_visible

BASE = datetime(2026, 1, 1, tzinfo=UTC)
INSTANTS = range(5)


def at(hour: int | None) -> datetime | None:
    return None if hour is None else BASE + timedelta(hours=hour)


def seconds(hour: int | None, absent: float) -> float:
    return rule.posix_seconds(at(hour), absent)


def _fact_grid() -> list[tuple[int, int | None, int, int | None]]:
    """(valid_from, valid_until, recorded_at, closed_at) in hours: open facts, and closed ones
    (a closure is always recorded: valid_until and closed_at come together)."""
    grid = []
    for start, recorded in itertools.product((0, 1, 2), (0, 2)):
        grid.append((start, None, recorded, None))
        for end, closed in itertools.product((1, 2, 3), (1, 3)):
            if end >= start:
                grid.append((start, end, recorded, closed))
    return grid


@pytest.fixture
def facts(default_project):
    subject = Entity.objects.create(project=default_project, slug="s", created_at=BASE)
    grid = _fact_grid()
    TemporalFact.objects.bulk_create(
        TemporalFact(
            id=f"f{i}",
            project=default_project,
            subject=subject,
            predicate="p",
            object_value=str(i),
            singular=False,
            valid_from=at(start),
            valid_until=at(end),
            recorded_at=at(recorded),
            closed_at=at(closed),
            sha256="0" * 64,
            revision=1,
        )
        for i, (start, end, recorded, closed) in enumerate(grid)
    )
    return grid


def test_facts_the_orm_and_the_rule_see_are_the_same(facts):
    ids = [f"f{i}" for i in range(len(facts))]
    columns = [np.array([seconds(row[k], a) for row in facts]) for k, a in enumerate(ABSENT)]
    lines = TimelineColumns.of(
        [
            FactLine(
                fid, 1, "p", False, *(seconds(row[k], a) for k, a in enumerate(ABSENT)), b"", None
            )
            for fid, row in zip(ids, facts, strict=True)
        ]
    )
    checked = 0
    for as_of, known_at in itertools.product(INSTANTS, (None, *INSTANTS)):
        orm = set(
            TemporalFact.objects.filter(fact_visible(at(as_of), at(known_at))).values_list(
                "id", flat=True
            )
        )
        known = math.inf if known_at is None else seconds(known_at, math.inf)
        scalar = {
            fid
            for fid, row in zip(ids, facts, strict=True)
            if rule.fact_visible(
                *(seconds(row[k], a) for k, a in enumerate(ABSENT)),
                as_of=seconds(as_of, 0),
                known_at=known,
            )
        }
        mask = rule.fact_visible(*columns, as_of=seconds(as_of, 0), known_at=known)
        assert orm == scalar == {ids[i] for i in np.flatnonzero(mask)}, (as_of, known_at)
        if known_at is not None:
            picked = lines.visible(seconds(as_of, 0), known)
            assert {lines.ids[i] for i in picked} == orm, (as_of, known_at)
        checked += len(orm)
    assert checked > 0


#: How each time of a fact reads when absent: an open valid_until is +inf; a fact never closed
#: reads as closed since ever (its valid_until is open anyway).
ABSENT = (-math.inf, math.inf, -math.inf, -math.inf)


def test_valid_time_alone_is_the_rule_as_recorded_now():
    for start, end, instant in itertools.product((0, 1), (1, 2, None), INSTANTS):
        until = seconds(end, math.inf)
        assert rule.valid_at(seconds(start, 0), until, seconds(instant, 0)) == bool(
            rule.fact_visible(seconds(start, 0), until, 0.0, -math.inf, as_of=seconds(instant, 0))
        )


def test_episodes_the_orm_and_the_rule_see_are_the_same(default_project):
    grid = list(itertools.product(range(4), range(4)))
    Episode.objects.bulk_create(
        Episode(
            id=f"e{i}",
            project=default_project,
            category="session_note",
            title="t",
            content="c",
            occurred_at=at(occurred),
            recorded_at=at(recorded),
            sha256="0" * 64,
            revision=1,
        )
        for i, (occurred, recorded) in enumerate(grid)
    )
    for as_of, known_at in itertools.product(INSTANTS, INSTANTS):
        orm = set(
            Episode.objects.filter(episode_visible(at(as_of), at(known_at))).values_list(
                "id", flat=True
            )
        )
        pure = {
            f"e{i}"
            for i, (occurred, recorded) in enumerate(grid)
            if rule.episode_visible(
                seconds(occurred, 0),
                seconds(recorded, 0),
                as_of=seconds(as_of, 0),
                known_at=seconds(known_at, 0),
            )
        }
        assert orm == pure, (as_of, known_at)
