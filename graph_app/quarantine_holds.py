"""A delivery that held flagged memory back queues each item for review (once), so a person can
release it: also the items recorded before screening flagged what they hold."""

from __future__ import annotations

import json
from collections.abc import Iterable

from graph_app.record_views import episode_find, episode_view, fact_find, fact_view
from memoryproject.models import Project
from memoryproject.quarantine import item_hold
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
