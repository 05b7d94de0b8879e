"""Reads of the audit trail: the injection log's hash chain, the facts the contradiction
auditor checks and its findings."""

from __future__ import annotations

from datetime import datetime

from audit_app.contracts import BrokenRecord, ChainVerification, FindingOut
from audit_app.domain.chain import record_hash, sha256_text
from audit_app.domain.contradictions import HeldFact
from audit_app.models import (
    GENESIS_HASH,
    ContradictionFinding,
    FindingState,
    InjectionRecord,
    record_payload,
)
from graph_app.models import TemporalFact
from graph_app.selectors import valid_at
from memoryproject.models import Project


def _break_reason(record: InjectionRecord, expected_seq: int, expected_prev: str) -> str:
    if record.seq != expected_seq:
        return f"seq {record.seq} follows {expected_seq - 1}: a record is missing"
    if record.prev_hash != expected_prev:
        return "prev_hash does not match the previous record's hash"
    if sha256_text(record.system_prompt) != record.prompt_sha256:
        return "system_prompt does not match prompt_sha256"
    if record_hash(record_payload(record)) != record.record_hash:
        return "record_hash does not match the record's fields"
    return ""


def injection_log_verify() -> ChainVerification:
    """Recomputes every record's hash in seq order; names the first record that breaks."""
    expected_prev = GENESIS_HASH
    expected_seq = 1
    checked = 0
    for record in InjectionRecord.objects.order_by("seq").iterator(chunk_size=2000):
        reason = _break_reason(record, expected_seq, expected_prev)
        if reason:
            broken = BrokenRecord(id=record.pk, seq=record.seq, reason=reason)
            return ChainVerification(ok=False, checked=checked, first_broken=broken)
        checked += 1
        expected_prev = record.record_hash
        expected_seq = record.seq + 1
    return ChainVerification(ok=True, checked=checked, first_broken=None)


def facts_held_at(*, project: Project, at: datetime) -> list[HeldFact]:
    """The project's facts valid at ``at`` as recorded now, as the contradiction rules read
    them (one query over the plain columns: audits run over 100,000 facts)."""
    rows = (
        TemporalFact.objects.filter(valid_at(at), project=project)
        .order_by()
        .values_list(
            "id",
            "subject__slug",
            "predicate",
            "object_value",
            "singular",
            "valid_from",
            "recorded_at",
            "sha256",
        )
    )
    return [HeldFact(*row) for row in rows.iterator(chunk_size=5000)]


def findings_by_fingerprint(*, project: Project) -> dict[str, ContradictionFinding]:
    return {f.fingerprint: f for f in ContradictionFinding.objects.filter(project=project)}


def open_findings_of_facts(*, project: Project) -> dict[str, int]:
    """Fact id -> the id of an open contradiction finding that names it."""
    marks: dict[str, int] = {}
    for finding_id, fact_ids in ContradictionFinding.objects.filter(
        project=project, state=FindingState.OPEN
    ).values_list("id", "fact_ids"):
        for fact_id in fact_ids:
            marks.setdefault(fact_id, finding_id)
    return marks


def finding_view(finding: ContradictionFinding) -> FindingOut:
    return FindingOut(
        id=finding.pk,
        rule=finding.rule,  # type: ignore[arg-type]
        subject=finding.subject,
        fact_ids=list(finding.fact_ids),
        evidence=finding.evidence,
        suggestion=finding.suggestion,
        resolvable=bool(finding.keep_fact),
        state=finding.state,  # type: ignore[arg-type]
        settled_by=finding.settled_by,
        reason=finding.reason,
    )
