"""Reads for auditors: receipts as they were recorded, whether what they delivered has
changed or been erased since (each source's content hash now against the one at delivery),
and the verification of the log and the graphs as a caller's projects may see it."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from audit_app.checkpoint_reads import checkpoint_latest
from audit_app.contracts import (
    AuditorFigures,
    AuditVerification,
    AuditVerifyInput,
    ChainPoint,
    ChainVerification,
    GraphHeadOut,
    InjectionDetail,
    InjectionOut,
    LogVerification,
    ProjectBreak,
    SourceNow,
)
from audit_app.models import ErasedText, InjectionRecord
from audit_app.selectors import injection_log_verify
from graph_app.contracts.integrity import IntegrityInput, IntegrityResult
from graph_app.integrity import integrity_verify
from graph_app.models import Episode, TemporalFact
from memoryproject.contracts import Caller
from memoryproject.errors import NotFoundError
from memoryproject.models import Project, Scope
from memoryproject.projects import Identity, projects_visible_to
from sessions_app.models import SessionSummary, Trace
from sessions_app.selectors import summary_sha256, trace_sha256


def injections_query(*, project_ids: Iterable[int]) -> QuerySet[InjectionRecord]:
    """The receipts and events of the given projects, newest first (filtered by the
    auditors' FilterSet)."""
    return (
        InjectionRecord.objects.filter(project_id__in=list(project_ids))
        .select_related("project")
        .order_by("-seq")
    )


def injection_view(record: InjectionRecord) -> InjectionOut:
    return InjectionOut(
        id=record.pk,
        seq=record.seq,
        project=record.project.slug if record.project else None,
        source=record.source,
        channel=record.channel,
        client=record.client,
        client_reported=record.client_reported,
        status=record.status,
        decision=record.decision,
        trust_score=record.trust_score,
        threshold=record.threshold,
        mode=record.mode,
        trace_ids=list(record.trace_ids),
        request=dict(record.request),
        items=list(record.items),
        prompt_sha256=record.prompt_sha256,
        generated_at=record.generated_at,
        created_at=record.created_at,
        prev_hash=record.prev_hash,
        record_hash=record.record_hash,
    )


def _hashes_now(
    items: list[dict[str, str]], project_id: int | None = None
) -> dict[tuple[str, str], tuple[str, bool]]:
    """(kind, id) -> (content hash now, erased) of the sources that still exist (traces and
    summaries of ``project_id``: a trace id is unique only within its project)."""
    ids = {kind: [i["id"] for i in items if i["kind"] == kind] for kind in ("trace", "summary")}
    now: dict[tuple[str, str], tuple[str, bool]] = {}
    in_project = {} if project_id is None else {"project_id": project_id}
    traces = Trace.objects.select_related("project").filter(
        trace_id__in=[uuid.UUID(i) for i in ids["trace"]], **in_project
    )
    for trace in traces:
        erased = trace.metadata == {"erased": True}
        now[("trace", str(trace.trace_id))] = (trace_sha256(trace), erased)
    summaries = SessionSummary.objects.select_related("trace", "project").filter(
        trace__trace_id__in=[uuid.UUID(i) for i in ids["summary"]], **in_project
    )
    for summary in summaries:
        erased = summary.trace.metadata == {"erased": True}
        now[("summary", str(summary.trace.trace_id))] = (summary_sha256(summary), erased)
    for kind, model in (("fact", TemporalFact), ("episode", Episode)):
        wanted = [i["id"] for i in items if i["kind"] == kind]
        for pk, sha in model.objects.filter(pk__in=wanted).values_list("pk", "sha256"):
            now[(kind, pk)] = (sha, False)
    return now


def sources_now(
    items: list[dict[str, str]], *, project_id: int
) -> dict[tuple[str, str], tuple[str, bool]]:
    """(kind, id) -> (content hash now, erased) of the given sources of ``project_id`` that
    still exist."""
    return _hashes_now(items, project_id)


def source_compared(item: dict[str, str], sha_now: str | None, *, erased: bool) -> dict[str, Any]:
    """A delivered source (a receipt's item) against its content hash now (None: the row is
    gone): its kind, id, both hashes, whether it changed since, and whether it was erased."""
    return {
        "kind": item["kind"],
        "id": item["id"],
        "sha256": item["sha256"],
        "sha256_now": sha_now,
        "changed_since": sha_now != item["sha256"],
        "erased": erased,
    }


def injection_detail(*, record_id: int, project_ids: Iterable[int]) -> InjectionDetail:
    """One receipt with the text as delivered and, per source, whether it changed since."""
    record = injections_query(project_ids=project_ids).filter(pk=record_id).first()
    if record is None:
        raise NotFoundError(f"id: no injection record {record_id}", field="id")
    now = _hashes_now(list(record.items), record.project_id)
    sources = []
    for item in record.items:
        sha_now, erased = now.get((item["kind"], item["id"]), (None, False))
        sources.append(SourceNow(**source_compared(item, sha_now, erased=erased)))
    text = record.system_prompt
    return InjectionDetail(
        **injection_view(record).model_dump(),
        text=text,
        text_erased=ErasedText.objects.filter(sha256=record.prompt_sha256).exists(),
        sources=sources,
    )


# --- verification, as the caller's projects see it -----------------------------------------

#: Why a record breaks the chain, by kind, for callers below the auditor role: the walk's own
#: reasons may name other records (their ids and seqs, the head's seq), which they must not see.
_KIND_REASONS = {
    "altered": "its fields no longer match its hash",
    "rewritten": "it was rewritten and rehashed (the next record still links to its original)",
    "link": "its prev_hash does not match the previous record's hash",
    "gap": "records before it are missing",
    "renumbered": "its seq was changed",
    "inserted": "it was not written by the application",
    "duplicate": "it is a copy of another record",
    "beyond_head": "it was appended after the head",
    "head": "it differs from the hash the head holds",
    "checkpoint": "it differs from the hash a checkpoint holds",
    "anchor": "it lies at or before the chain's start",
    "text": "its delivered text was altered or removed without erasure",
}


def auditor_is(identity: Identity | None) -> bool:
    """The auditor role: the operator (no identity: management commands) or an admin-scope
    key bound to every project there is. Only it sees the whole log's figures (head, records,
    anchor, checkpoints, warnings): to a key bound to some projects they would tell the others'
    activity, while a key bound to all learns nothing it could not read. Binding keys to no
    project or to "all" does not exist, so a project created later takes the role away until
    the key is bound to it too. (A local stdio identity is never admin.)"""
    if identity is None:
        return True
    if not identity.allows(Scope.ADMIN):
        return False
    reached = [p.pk for p in projects_visible_to(identity)]
    return not Project.objects.exclude(pk__in=reached).exists()


def _checked_among(chain: ChainVerification, records: QuerySet[InjectionRecord]) -> int:
    """How many of ``records`` the walk verified: those among the first ``chain.checked``
    records after the anchor (in seq order, as the walk reads them)."""
    if chain.checked <= 0 or chain.anchor is None:
        return 0
    after = InjectionRecord.objects.filter(seq__gt=chain.anchor.seq).order_by("seq", "id")
    last = list(after.values_list("seq", flat=True)[chain.checked - 1 : chain.checked])
    if not last:
        return 0
    return records.filter(seq__gt=chain.anchor.seq, seq__lte=last[0]).count()


def _log_seen(chain: ChainVerification, projects: list[Project], auditor: bool) -> LogVerification:
    """The whole log's verification, telling only what concerns ``projects``."""
    slugs = {p.pk: p.slug for p in projects}
    records = InjectionRecord.objects.filter(project_id__in=list(slugs))
    # The log as this verification held it: a record appended since is no part of it.
    held = records.filter(seq__lte=chain.head.seq) if chain.head is not None else records
    newest = held.order_by("-seq").values_list("seq", "record_hash").first()
    latest = ChainPoint(seq=newest[0], hash=newest[1]) if newest else None
    checked = _checked_among(chain, records)
    broken, found = chain.first_broken, None
    if broken is not None and broken.id is not None:
        owner = records.filter(pk=broken.id).values_list("project_id", flat=True).first()
        if owner is not None:
            reason = broken.reason if auditor else _KIND_REASONS.get(broken.kind, broken.kind)
            found = ProjectBreak(
                **broken.model_dump(exclude={"reason"}), reason=reason, project=slugs[owner]
            )
    if chain.ok:
        statement = (
            f"The injection log verifies (the whole chain); {checked} record(s) of "
            "these projects were checked."
        )
    elif found is not None:
        statement = (
            f"The injection log does not verify: the first break is record seq {found.seq} "
            f"(id {found.id}) of project '{found.project}': {found.reason}."
        )
    else:
        where = "auditor.log names it" if auditor else "only the auditor role sees where"
        statement = (
            f"The injection log does not verify, and not at a record of these projects: {where}."
        )
    return LogVerification(
        ok=chain.ok, statement=statement, checked=checked, first_broken=found, latest=latest
    )


def _graph_verified(project: Project, head: GraphHeadOut | None) -> IntegrityResult:
    """The project's graph, held to its head in the latest checkpoint when there is one."""
    anchor = {"checkpoint_size": head.size, "checkpoint_head": head.head} if head else {}
    return integrity_verify(project=project, params=IntegrityInput.parse(anchor))


def audit_verify(
    *,
    identity: Identity | None,
    project: Project | None = None,
    params: AuditVerifyInput | None = None,
    caller: Caller | None = None,
) -> AuditVerification:
    """The log and the graphs of the caller's projects (``project``: only that one, which
    the doors have resolved for ``identity``), each held to its head and to the latest stored
    checkpoint. The whole log is always verified; what the answer shows of it depends on the
    role (``auditor_is``): a caller below the auditor role learns whether it verifies, how many
    of its projects' records were checked, their newest record, and where it breaks only when
    that is one of their records. ``params`` and ``caller`` complete the operation's call:
    verification takes no argument and writes nothing."""
    del params, caller
    auditor = auditor_is(identity)
    if project is not None:
        projects = [project]
    else:
        projects = sorted(projects_visible_to(identity), key=lambda p: p.slug)
    chain = injection_log_verify()
    checkpoint = checkpoint_latest()
    heads = checkpoint.body.graph if checkpoint is not None else {}
    graph = {p.slug: _graph_verified(p, heads.get(p.slug)) for p in projects}
    log = _log_seen(chain, projects, auditor)
    return AuditVerification(
        verified=log.ok and all(g.verified for g in graph.values()),
        projects=[p.slug for p in projects],
        log=log,
        graph=graph,
        auditor=AuditorFigures(log=chain, checkpoint=checkpoint) if auditor else None,
    )
