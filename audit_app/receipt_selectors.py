"""Reads for auditors: receipts as they were recorded, and whether what they delivered has
changed or been erased since (each source's content hash now against the one at delivery)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.db.models import QuerySet

from audit_app.contracts import AuditVerification, InjectionDetail, InjectionOut, SourceNow
from audit_app.models import ErasedText, InjectionRecord
from audit_app.selectors import checkpoint_latest, injection_log_verify
from graph_app.models import Episode, TemporalFact
from graph_app.selectors import integrity_verify
from memoryproject.errors import NotFoundError
from memoryproject.models import Project
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


def injection_detail(*, record_id: int, project_ids: Iterable[int]) -> InjectionDetail:
    """One receipt with the text as delivered and, per source, whether it changed since."""
    record = injections_query(project_ids=project_ids).filter(pk=record_id).first()
    if record is None:
        raise NotFoundError(f"id: no injection record {record_id}", field="id")
    now = _hashes_now(list(record.items), record.project_id)
    sources = []
    for item in record.items:
        sha_now, erased = now.get((item["kind"], item["id"]), (None, False))
        sources.append(
            SourceNow(
                kind=item["kind"],
                id=item["id"],
                sha256=item["sha256"],
                sha256_now=sha_now,
                changed_since=sha_now != item["sha256"],
                erased=erased,
            )
        )
    text = record.system_prompt
    return InjectionDetail(
        **injection_view(record).model_dump(),
        text=text,
        text_erased=ErasedText.objects.filter(sha256=record.prompt_sha256).exists(),
        sources=sources,
    )


def audit_verify(*, projects: Iterable[Project]) -> AuditVerification:
    """The log and the graphs of ``projects``, each held to its head and to the latest stored
    checkpoint (when one exists)."""
    log = injection_log_verify()
    checkpoint = checkpoint_latest()
    heads = checkpoint.body.graph if checkpoint is not None else {}
    graph = {}
    for project in projects:
        head = heads.get(project.slug)
        anchor = {"checkpoint_size": head.size, "checkpoint_head": head.head} if head else {}
        graph[project.slug] = integrity_verify(project=project, **anchor)
    verified = bool(log.ok) and all(g.verified for g in graph.values())
    return AuditVerification(verified=verified, log=log, graph=graph, checkpoint=checkpoint)
