"""The review queue's quarantined items: memory that screening flagged, held back from every
delivery until a person releases it.

Each flagged item (a trace, a saved summary, a fact, an episode) is queued once as a review
of source ``item``, holding its id, content hash, the reasons and its recorded text for the
reviewer. Approving it releases the item: from then on it is delivered like any other (still
spotlighted as data); the decision, with its reason and reviewer, is an event of the
hash-chained injection log (``review_decide``). Rejecting it keeps it quarantined for good.
A release names the content hash the reviewer saw: an item whose hash differs is not released.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from audit_app.models import Review, ReviewState
from audit_app.reviews import review_open
from memoryproject.models import Project

SOURCE = "item"
_DECIDED_OR_WAITING = (ReviewState.OPEN, ReviewState.APPROVED, ReviewState.REJECTED)


def _key(item: dict[str, str]) -> tuple[str, str, str]:
    return str(item.get("kind", "")), str(item.get("id", "")), str(item.get("sha256", ""))


def quarantine_held(*, project: Project, kind: str, item_id: str) -> Review | None:
    """The review that holds the item (waiting or decided), or None."""
    for review in Review.objects.filter(
        project=project, source=SOURCE, state__in=_DECIDED_OR_WAITING
    ).only("pk", "state", "items"):
        if any(_key(item)[:2] == (kind, item_id) for item in review.items):
            return review
    return None


def quarantine_hold(
    *,
    project: Project,
    kind: str,
    item_id: str,
    sha256: str,
    reasons: Sequence[str],
    text: str,
) -> Review:
    """Queues a flagged item for review (once: an item already held answers its review). Runs
    in the caller's transaction."""
    held = quarantine_held(project=project, kind=kind, item_id=item_id)
    if held is not None:
        return held
    return review_open(
        project=project,
        source=SOURCE,
        reason="Quarantined by screening: " + "; ".join(reasons),
        trust_score=0.0,
        risk=1.0,
        threshold=0.0,
        decision="ESCALATE",
        signals={"reasons": list(reasons)},
        context={"kind": kind, "id": item_id},
        trace_ids=[item_id] if kind in ("trace", "summary") else [],
        items=[{"kind": kind, "id": item_id, "sha256": sha256}],
        text=f"{kind} {item_id} (sha256 {sha256})\n\n{text}",
    )


def quarantine_released(
    *, project: Project, items: Iterable[tuple[str, str, str]]
) -> set[tuple[str, str]]:
    """Which of the flagged ``(kind, id, sha256)`` a reviewer released: approved, for that
    very content hash. One query, asked only when a delivery meets a flagged item."""
    wanted = set(items)
    if not wanted:
        return set()
    released: set[tuple[str, str]] = set()
    for review in Review.objects.filter(
        project=project, source=SOURCE, state=ReviewState.APPROVED
    ).only("items"):
        for item in review.items:
            key = _key(item)
            if key in wanted:
                released.add(key[:2])
    return released
