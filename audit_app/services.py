"""Writes of the audit trail: appending to the injection log (the one function that writes
injection records) and running the contradiction auditor.

Callers invoke it inside their own ``transaction.atomic`` so the record commits with the
decision it receipts. The chain head row is locked with SELECT ... FOR UPDATE (PostgreSQL); on
SQLite the IMMEDIATE transaction mode already holds the database write lock from BEGIN, so
appends are serialised there too. ``seq`` and ``record_hash`` are unique as a last line of
defence.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction

from audit_app.contracts import ContradictionAuditInput, ContradictionAuditResult
from audit_app.domain.chain import record_hash, sha256_text
from audit_app.domain.contradictions import (
    DEFAULT_ANTONYMS,
    Finding,
    RuleBook,
    contradictions_find,
)
from audit_app.models import (
    GENESIS_HASH,
    AuditRun,
    ContradictionFinding,
    FindingState,
    InjectionLogHead,
    InjectionRecord,
    record_payload,
)
from audit_app.selectors import facts_held_at, finding_view, findings_by_fingerprint
from graph_app.services import fact_supersede
from memoryproject.contracts import Caller, takes
from memoryproject.errors import ApplicationError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

__all__ = ["SOURCES", "contradictions_audit", "injection_log_append", "record_payload"]

SOURCES = ("plan", "load")


def _head_locked() -> InjectionLogHead:
    head, _ = InjectionLogHead.objects.select_for_update().get_or_create(
        pk=1, defaults={"seq": 0, "last_hash": GENESIS_HASH}
    )
    return head


def injection_log_append(
    *,
    project: Project,
    channel: str,
    client: str,
    status: str,
    decision: str,
    trust_score: float,
    threshold: float,
    mode: str,
    trace_ids: Sequence[str],
    system_prompt: str,
    generated_at: datetime,
    source: str = "plan",
) -> InjectionRecord:
    """Appends one record to the chain and answers it."""
    if source not in SOURCES:
        raise ApplicationError(f"source: must be one of {', '.join(SOURCES)}", field="source")
    if not isinstance(channel, str) or not channel.strip():
        raise ApplicationError("channel: must be a non-empty string", field="channel")
    if generated_at.tzinfo is None:
        raise ApplicationError("generated_at: must be timezone-aware", field="generated_at")
    # Joins the caller's transaction (no savepoint: a failed append must fail the caller's
    # whole decision anyway); standalone calls get a transaction of their own.
    with transaction.atomic(savepoint=False):
        head = _head_locked()
        record = InjectionRecord(
            seq=head.seq + 1,
            project=project,
            source=source,
            channel=channel.strip()[:32],
            client=(client or "")[:200],
            status=status,
            decision=decision,
            trust_score=float(trust_score),
            threshold=float(threshold),
            mode=mode,
            trace_ids=[str(t) for t in trace_ids],
            system_prompt=system_prompt,
            prompt_sha256=sha256_text(system_prompt),
            generated_at=generated_at,
            created_at=utcnow(),
            prev_hash=head.last_hash,
        )
        record.record_hash = record_hash(record_payload(record))
        record.save(force_insert=True)
        head.seq = record.seq
        head.last_hash = record.record_hash
        head.save(update_fields=["seq", "last_hash"])
    return record


# --- the contradiction auditor ------------------------------------------------------------------


def rule_book() -> RuleBook:
    """The contradiction rules as this installation extends them (see settings)."""
    return RuleBook(
        antonyms=(*DEFAULT_ANTONYMS, *((str(a), str(b)) for a, b in settings.MEMORY_ANTONYMS)),
        aliases=dict(settings.MEMORY_PREDICATE_ALIASES),
        singular=frozenset(settings.MEMORY_SINGULAR_PREDICATES),
        relational=frozenset(settings.MEMORY_RELATIONAL_PREDICATES),
    )


def _record_finding(
    project: Project, run: AuditRun, found: Finding, known: dict[str, ContradictionFinding]
) -> ContradictionFinding | None:
    """Stores a finding of this run; None when a person already dismissed or resolved it and
    its facts have not changed since."""
    finding = known.get(found.fingerprint)
    if finding is not None and finding.state != FindingState.OPEN:
        return None
    if finding is None:
        finding = ContradictionFinding(
            project=project,
            first_run=run,
            fingerprint=found.fingerprint,
            rule=found.rule,
            subject=found.subject,
            fact_ids=list(found.fact_ids),
            evidence=found.evidence,
            suggestion=found.suggestion,
            keep_fact=found.keep or "",
        )
    finding.last_seen_run = run
    finding.save()
    return finding


def _auto_resolve(project: Project, found: Finding, finding: ContradictionFinding) -> None:
    assert found.keep is not None
    for old in found.retire:
        fact_supersede(project=project, fact_id=old, by=found.keep)
    finding.state = FindingState.RESOLVED
    finding.settled_by = "auto-resolve"
    finding.reason = f"rule {found.rule}: kept {found.keep}, retired {', '.join(found.retire)}"
    finding.settled_at = utcnow()
    finding.save()


def _close_vanished(project: Project, seen: set[str], run: AuditRun) -> None:
    """Open findings whose facts no longer conflict (changed, retracted) are settled."""
    ContradictionFinding.objects.filter(project=project, state=FindingState.OPEN).exclude(
        fingerprint__in=seen
    ).update(
        state=FindingState.RESOLVED,
        settled_by="auditor",
        reason=f"no longer found by run {run.pk}: the facts changed",
        settled_at=utcnow(),
    )


@takes(ContradictionAuditInput)
def contradictions_audit(
    *, project: Project, params: ContradictionAuditInput, caller: Caller
) -> ContradictionAuditResult:
    """Checks the facts held at ``as_of`` (default now) against the contradiction rules, stores
    the run and its findings and, with ``auto_resolve``, retires the older side of every
    resolvable conflict through supersession (history keeps it; the finding records the rule
    and the evidence). A finding a person dismissed is not reported again until its facts
    change."""
    started = utcnow()
    at = params.as_of or started
    held = facts_held_at(project=project, at=at)
    found = contradictions_find(held, rule_book())
    with transaction.atomic():
        run = AuditRun.objects.create(
            project=project,
            started_at=started,
            finished_at=started,
            as_of=at,
            facts_checked=len(held),
            findings=0,
            channel=caller.channel,
            client=caller.client,
        )
        known = findings_by_fingerprint(project=project)
        reported = []
        for item in found:
            finding = _record_finding(project, run, item, known)
            if finding is None:
                continue
            if params.auto_resolve and item.resolvable:
                _auto_resolve(project, item, finding)
                run.auto_resolved += 1
            reported.append(finding)
        _close_vanished(project, {f.fingerprint for f in reported}, run)
        run.findings = sum(1 for f in reported if f.state == FindingState.OPEN)
        run.finished_at = utcnow()
        run.save()
    return ContradictionAuditResult(
        run_id=run.pk,
        project=project.slug,
        as_of=at,
        facts_checked=len(held),
        open=run.findings,
        auto_resolved=run.auto_resolved,
        findings=[finding_view(f) for f in reported],
    )


def finding_settle(
    *, finding: ContradictionFinding, state: str, by: str, reason: str
) -> ContradictionFinding:
    """A person resolves or dismisses a finding, with a reason."""
    if state not in (FindingState.RESOLVED, FindingState.DISMISSED):
        raise validation_error("state", "must be resolved or dismissed")
    if not reason.strip():
        raise validation_error("reason", "must not be empty: say why")
    finding.state, finding.settled_by = state, by
    finding.reason, finding.settled_at = reason.strip(), utcnow()
    finding.save(update_fields=["state", "settled_by", "reason", "settled_at"])
    return finding
