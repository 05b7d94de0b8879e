"""The review queue: flagged contexts and contradiction findings a person decides.

A plan flagged in mode auto and a load refused on trust each queue their context (once: the
same text already waiting is not queued twice) with the reason, score, signals, the sources and
the exact text. A reviewer approves or rejects it with a reason; the decision is an event of the
hash-chained injection log. An approved context is delivered once, on the project's next call of
the same kind (``review_claim``: a conditional UPDATE, so two concurrent calls cannot both take
it), and only while its sources still carry the hashes the reviewer saw; a rejected one never
is. Contradiction findings are settled the same way (``finding_settle`` appends the event).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Literal

from audit_app.domain.chain import sha256_text
from audit_app.findings import finding_settle
from audit_app.injection_log import audit_event_append
from audit_app.models import ContradictionFinding, Review, ReviewState
from audit_app.receipt_selectors import sources_now
from memoryproject import sql
from memoryproject.errors import ApplicationError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from memoryproject.writes import write_transaction

__all__ = [
    "review_claim",
    "review_decide",
    "review_finding_decide",
    "review_open",
    "reviews_forget",
]

Decision = Literal["approve", "reject"]
ERASED = "[erased]"
PENDING = (ReviewState.OPEN, ReviewState.APPROVED)


def review_open(
    *,
    project: Project,
    source: str,
    reason: str,
    trust_score: float,
    risk: float,
    threshold: float,
    decision: str,
    signals: Mapping[str, Any],
    context: Mapping[str, Any],
    trace_ids: Sequence[str],
    items: Sequence[Mapping[str, str]],
    text: str,
    flagged_injection_id: int | None = None,
) -> Review:
    """Queues a flagged context for review and answers its review; the same text already
    waiting (or approved) for the project and source answers that review instead. Runs inside
    the caller's transaction (the flagged decision and its review commit together)."""
    digest = sha256_text(text)
    pending = Review.objects.filter(
        project=project, source=source, text_sha256=digest, state__in=PENDING
    )
    with write_transaction(savepoint=False):
        # ON CONFLICT DO NOTHING: a concurrent twin queued first, and is answered below.
        Review.objects.bulk_create(
            [
                Review(
                    project=project,
                    source=source,
                    created_at=utcnow(),
                    flagged_injection_id=flagged_injection_id,
                    reason=reason,
                    trust_score=float(trust_score),
                    risk=float(risk),
                    threshold=float(threshold),
                    decision=decision,
                    signals=dict(signals),
                    context=dict(context),
                    trace_ids=[str(t) for t in trace_ids],
                    items=[dict(item) for item in items],
                    text=text,
                    text_sha256=digest,
                )
            ],
            ignore_conflicts=True,
        )
        review = pending.order_by("id").first()
    assert review is not None  # the row inserted, or the twin that made the insert a no-op
    return review


def _decision_state(decision: str) -> ReviewState:
    if decision == "approve":
        return ReviewState.APPROVED
    if decision == "reject":
        return ReviewState.REJECTED
    raise validation_error("decision", "must be approve or reject")


def review_decide(*, review_id: int, decision: str, by: str, reason: str) -> Review:
    """A reviewer approves or rejects an open review, always with a reason; the decision is
    appended to the injection log in the same transaction. Checking that ``by`` may decide
    (the ``audit_app.decide_review`` permission) is the caller's part."""
    state = _decision_state(decision)
    if not isinstance(reason, str) or not reason.strip():
        raise validation_error("reason", "must not be empty: say why")
    if not by.strip():
        raise validation_error("by", "must name the reviewer")
    with write_transaction():
        rows = Review.objects.select_for_update(of=("self",)).select_related("project")
        found = rows.filter(pk=review_id).first()
        if found is None:
            raise validation_error("review", f"no review {review_id}")
        if found.state != ReviewState.OPEN:
            raise validation_error("review", f"review {review_id} is already {found.state}")
        now = utcnow()
        event = audit_event_append(
            kind="review",
            project=found.project,
            channel="admin",
            client=by.strip(),
            details={
                "subject": "context",
                "review_id": found.pk,
                "source": found.source,
                "decision": str(state),
                "reason": reason.strip(),
                "by": by.strip(),
                "flagged_injection_id": found.flagged_injection_id,
                "text_sha256": found.text_sha256,
                "items": found.items,
            },
        )
        found.state, found.decided_by, found.decided_at = state, by.strip(), now
        found.decision_reason, found.decision_seq = reason.strip(), event.seq
        found.save(
            update_fields=["state", "decided_by", "decided_at", "decision_reason", "decision_seq"]
        )
    return found


def review_finding_decide(
    *, finding_id: int, decision: str, by: str, reason: str
) -> ContradictionFinding:
    """A reviewer resolves or dismisses an open contradiction finding with a reason (the event
    is appended by ``finding_settle``)."""
    with write_transaction():
        finding = (
            ContradictionFinding.objects.select_for_update(of=("self",))
            .select_related("project")
            .filter(pk=finding_id)
            .first()
        )
        if finding is None:
            raise validation_error("finding", f"no contradiction finding {finding_id}")
        if finding.state != "open":
            raise validation_error("finding", f"finding {finding_id} is already {finding.state}")
        return finding_settle(finding=finding, state=decision, by=by, reason=reason)


def _sources_unchanged(review: Review) -> bool:
    now = sources_now(list(review.items), project_id=review.project_id)
    return all(
        now.get((item["kind"], item["id"]), ("", True)) == (item["sha256"], False)
        for item in review.items
    )


@cache
def _approved_any_sql() -> str:
    where = " AND ".join(f"{sql.column(Review, f)} = %s" for f in ("project", "source", "state"))
    return f"SELECT 1 FROM {sql.table(Review)} WHERE {where} LIMIT 1"


def review_claim(*, project: Project, source: str) -> Review | None:
    """Takes the oldest approved context of ``project`` for a call of kind ``source`` (plan or
    load) to deliver now, or None. Exactly once: the claim is a conditional UPDATE (approved ->
    delivered) inside the caller's transaction, so a concurrent call or a rollback cannot
    deliver it twice. An approved context whose sources changed or were erased since the
    review is voided instead: what is delivered is only ever what the reviewer saw."""
    if not sql.fetch(_approved_any_sql(), [project.pk, source, ReviewState.APPROVED.value]):
        return None  # the common case, asked on every plan and load in one cheap statement
    approved = Review.objects.filter(
        project=project, source=source, state=ReviewState.APPROVED
    ).order_by("decided_at", "id")
    for review in approved:
        if not _sources_unchanged(review):
            Review.objects.filter(pk=review.pk, state=ReviewState.APPROVED).update(
                state=ReviewState.VOID,
                note="not delivered: its sources changed or were erased after the review",
            )
            continue
        now = utcnow()
        taken = Review.objects.filter(pk=review.pk, state=ReviewState.APPROVED).update(
            state=ReviewState.DELIVERED, delivered_at=now
        )
        if taken:
            review.state, review.delivered_at = ReviewState.DELIVERED, now
            return review
    return None


def review_delivered(*, review: Review, injection_id: int) -> None:
    """Records the receipt of an approved context's delivery on its review."""
    if review.state != ReviewState.DELIVERED:
        raise ApplicationError(f"review {review.pk} was not claimed for delivery")
    Review.objects.filter(pk=review.pk).update(delivered_injection_id=injection_id)
    review.delivered_injection_id = injection_id


def reviews_forget(*, project: Project | None, items: Sequence[Mapping[str, str]]) -> int:
    """Erasure reaches the queue too: reviews that hold an erased source lose their text and
    context, and a pending one is voided. Answers how many reviews were changed."""
    erased = {(item["kind"], item["id"]) for item in items}
    if not erased:
        return 0
    reviews = Review.objects.all() if project is None else Review.objects.filter(project=project)
    changed = 0
    for review in reviews.only("pk", "state", "items"):
        if not any((item["kind"], item["id"]) in erased for item in review.items):
            continue
        fields: dict[str, Any] = {"text": ERASED, "context": {}}
        if review.state in PENDING:
            fields.update(state=ReviewState.VOID, note="not delivered: a source was erased")
        Review.objects.filter(pk=review.pk).update(**fields)
        changed += 1
    return changed
