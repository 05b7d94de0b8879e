"""Contradiction findings: the auditor that checks the facts held at a time against the
contradiction rules and records what it finds (``contradictions_audit``, optionally retiring the
older side of a resolvable conflict), and a person settling a finding (``finding_settle``)."""

from __future__ import annotations

from django.conf import settings

from audit_app.contracts import ContradictionAuditInput, ContradictionAuditResult
from audit_app.domain.contradictions import DEFAULT_ANTONYMS, Finding, RuleBook, contradictions_find
from audit_app.finding_selectors import facts_held_at, finding_view, findings_by_fingerprint
from audit_app.injection_log import audit_event_append
from audit_app.models import AuditRun, ContradictionFinding, FindingState
from graph_app.fact_writes import fact_supersede
from memoryproject.collector import collector_paused
from memoryproject.contracts import Caller, takes
from memoryproject.errors import validation_error
from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from memoryproject.writes import write_transaction


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
    with collector_paused():  # every held fact read at once
        held = facts_held_at(project=project, at=at)
        found = contradictions_find(held, rule_book())
    with write_transaction():
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
    """A person resolves or dismisses a finding, with a reason; the decision is appended to
    the injection log (event "review") in the same transaction."""
    if state not in (FindingState.RESOLVED, FindingState.DISMISSED):
        raise validation_error("state", "must be resolved or dismissed")
    if not reason.strip():
        raise validation_error("reason", "must not be empty: say why")
    with write_transaction():
        finding.state, finding.settled_by = state, by
        finding.reason, finding.settled_at = reason.strip(), utcnow()
        finding.save(update_fields=["state", "settled_by", "reason", "settled_at"])
        audit_event_append(
            kind="review",
            project=finding.project,
            channel="admin",
            client=by,
            details={
                "subject": "finding",
                "finding_id": finding.pk,
                "rule": finding.rule,
                "fact_ids": list(finding.fact_ids),
                "decision": str(state),
                "reason": finding.reason,
                "by": by,
            },
        )
    return finding
