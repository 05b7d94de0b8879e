"""A delivery that held flagged memory back queues each item for review (once), so a person can
release it: also the items recorded before screening flagged what they hold. A write queues the
fact or episode it found flagged from the start."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from graph_app.contracts.episodes import EpisodeOut
from graph_app.contracts.facts import FactOut
from graph_app.record_views import episode_find, episode_view, fact_find, fact_view
from memoryproject.domain.screening import Flag
from memoryproject.models import Project
from memoryproject.quarantine import item_hold, record_hold
from memoryproject.screening import QuarantinedOut


def deliveries_held(*, project: Project, held: Iterable[QuarantinedOut]) -> None:
    """Queues each quarantined fact or episode with its record for the reviewer; call in the
    delivery's transaction."""
    for item in held:
        if item.kind == "fact":
            record = fact_view(fact_find(fact_id=item.id, project_ids=[project.pk])).as_json()
        else:
            found = episode_find(episode_id=item.id, project_ids=[project.pk])
            record = episode_view(found).as_json()
        item_hold(
            project=project,
            kind=item.kind,
            item_id=item.id,
            sha256=str(record["sha256"]),
            reasons=item.reasons,
            text=json.dumps(record, ensure_ascii=False, indent=2),
        )


def written_hold(
    *,
    project: Project,
    kind: Literal["fact", "episode"],
    written: FactOut | EpisodeOut,
    flags: Iterable[Flag],
) -> None:
    """Queues the fact or episode a write just stored when screening flagged it (nothing when
    ``flags`` is empty), with its answer as the reviewer's record; call in the write's
    transaction."""
    record_hold(
        project=project,
        kind=kind,
        item_id=written.id,
        sha256=written.sha256,
        flags=flags,
        record=written.as_json(),
    )
