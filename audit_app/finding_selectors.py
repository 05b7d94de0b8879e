"""Reads for the contradiction auditor: the facts it checks and its findings."""

from __future__ import annotations

from datetime import datetime
from functools import cache

from audit_app.contracts import FindingOut
from audit_app.domain.contradictions import HeldFact
from audit_app.models import ContradictionFinding, FindingState
from graph_app.models import TemporalFact
from graph_app.visibility import fact_visible
from memoryproject import sql
from memoryproject.models import Project


def facts_held_at(*, project: Project, at: datetime) -> list[HeldFact]:
    """The project's facts valid at ``at`` as recorded now, as the contradiction rules read
    them (one query over the plain columns: audits run over 100,000 facts)."""
    rows = (
        TemporalFact.objects.filter(fact_visible(at), project=project)
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


@cache
def _open_findings_sql() -> str:
    return (
        f"{sql.select(ContradictionFinding, _OPEN_FINDING_FIELDS)} "
        f"WHERE {sql.column(ContradictionFinding, 'project')} = %s "
        f"AND {sql.column(ContradictionFinding, 'state')} = %s"
    )


_OPEN_FINDING_FIELDS = ("pk", "fact_ids")


def open_findings_of_facts(*, project: Project) -> dict[str, int]:
    """Fact id -> the id of an open contradiction finding that names it (read on every
    compile, through the finding_project_state index)."""
    marks: dict[str, int] = {}
    for finding_id, fact_ids in sql.rows(
        ContradictionFinding,
        _OPEN_FINDING_FIELDS,
        _open_findings_sql(),
        [project.pk, FindingState.OPEN.value],
    ):
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
