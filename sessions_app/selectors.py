"""Reads of traces and saved summaries, always within one project."""

from __future__ import annotations

import uuid
from datetime import datetime
from functools import cache, lru_cache
from types import MappingProxyType
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import QuerySet

from memoryproject import sql
from memoryproject.errors import ApplicationError, NotFoundError
from memoryproject.models import Project
from sessions_app.contracts import TraceOut
from sessions_app.domain.context import TraceView
from sessions_app.domain.records import content_sha256, summary_canonical, trace_canonical
from sessions_app.models import SessionSummary, Trace

#: A trace's recorded columns: what context extraction reads, what the receipt's content hash
#: of each trace covers, and what an export file holds of a trace.
TRACE_COLUMNS = (
    "trace_id",
    "created_at",
    "model",
    "policy",
    "decision",
    "trust_score",
    "risk",
    "status_code",
    "metadata",
)


def trace_list(*, project_ids: list[int]) -> QuerySet[Trace]:
    return (
        Trace.objects.filter(project_id__in=project_ids)
        .select_related("project")
        .order_by("-created_at", "-id")
    )


def trace_get(*, trace_id: uuid.UUID | str, project_ids: list[int] | None) -> Trace:
    """A trace by id, or 404 when it does not exist or lies in a project the caller can't see."""
    queryset = Trace.objects.select_related("project")
    if project_ids is not None:
        queryset = queryset.filter(project_id__in=project_ids)
    try:
        found = list(queryset.filter(trace_id=uuid.UUID(str(trace_id)))[:2])
    except ValueError:
        found = []
    if not found:
        raise NotFoundError(f"trace_id: no trace '{trace_id}'", field="trace_id")
    if len(found) > 1:
        # A trace id is unique within its project: the caller sees it in several.
        raise ApplicationError(
            f"project: required, trace '{trace_id}' is in several of your projects; "
            "name one with ?project=",
            field="project",
        )
    return found[0]


@cache
def _recent_sql() -> str:
    """The plan's read (every request): the newest traces of a project, through the
    trace_project_recent index, in a statement built once."""
    return (
        f"{sql.select(Trace, ('pk', *TRACE_COLUMNS))} "
        f"WHERE {sql.column(Trace, 'project')} = %s "
        f"ORDER BY {sql.column(Trace, 'created_at')} DESC, {sql.column(Trace, 'pk')} DESC "
        "LIMIT %s"
    )


def traces_recent(*, project: Project, n: int) -> list[TraceView]:
    """The n most recent traces of a project, newest first (served by trace_project_recent).

    Each row read is converted and hashed once per process: the view is kept under the row
    exactly as stored (every column the hash covers, as the database answers it), so a row
    changed in any way since (an edit, a tampered column) is read and hashed anew, never
    answered from memory."""
    views = []
    using = DEFAULT_DB_ALIAS  # the database sql.fetch reads
    for raw in sql.fetch(_recent_sql(), [project.pk, n]):
        row = tuple(raw)
        try:
            views.append(_trace_view_kept(using, project.slug, row))
        except TypeError:  # a column the driver answers unhashable: not kept
            views.append(_trace_view_of(using, project.slug, row))
    return views


@lru_cache(maxsize=2048)
def _trace_view_kept(using: str, project_slug: str, raw: tuple[Any, ...]) -> TraceView:
    return _trace_view_of(using, project_slug, raw)


def _trace_view_of(using: str, project_slug: str, raw: tuple[Any, ...]) -> TraceView:
    pk, *values = sql.row_converter(Trace, ("pk", *TRACE_COLUMNS), using)(raw)
    row = dict(zip(TRACE_COLUMNS, values, strict=True))
    metadata = row["metadata"] if isinstance(row["metadata"], dict) else {}
    return TraceView(
        trace_id=str(row["trace_id"]),
        model=row["model"],
        trust_score=row["trust_score"],
        risk=row["risk"],
        # Shared by every plan that reads the row: read-only.
        metadata=MappingProxyType(metadata),
        sha256=_trace_sha256(row, project_slug),
        row_id=pk,
    )


def _trace_sha256(row: dict[str, Any], project_slug: str) -> str:
    fields = {name: row[name] for name in TRACE_COLUMNS}
    fields["trace_id"] = str(fields["trace_id"])
    return content_sha256(trace_canonical(project=project_slug, **fields))


def trace_sha256(trace: Trace) -> str:
    """The content hash a receipt records for ``trace`` (to tell whether it changed since)."""
    row = {name: getattr(trace, name) for name in TRACE_COLUMNS}
    return _trace_sha256(row, trace.project.slug)


def summary_sha256(summary: SessionSummary) -> str:
    """The content hash a receipt records for a loaded summary."""
    return content_sha256(
        summary_canonical(
            trace_id=str(summary.trace.trace_id),
            project=summary.project.slug,
            summary=summary.summary,
            tokens=summary.tokens,
            trust_score=summary.trust_score,
            risk=summary.risk,
            decision=summary.decision,
            created_at=summary.created_at,
        )
    )


def trace_view(trace: Trace, **extra: Any) -> TraceOut:
    """The trace as answered; ``extra`` adds the fields only a write answers (screening)."""
    return TraceOut(
        trace_id=str(trace.trace_id),
        project=trace.project.slug,
        created_at=trace.created_at,
        model=trace.model,
        policy=trace.policy,
        decision=trace.decision,  # type: ignore[arg-type]
        trust_score=trace.trust_score,
        risk=trace.risk,
        status_code=trace.status_code,
        metadata=trace.metadata,
        **extra,
    )


def session_summary_latest(
    *, project: Project, since: datetime | None = None, min_trust: float | None = None
) -> SessionSummary | None:
    """The project's newest saved summary, optionally saved at or after ``since`` and with a
    trust score of at least ``min_trust`` (served by summary_project_recent)."""
    queryset = SessionSummary.objects.filter(project=project)
    if since is not None:
        queryset = queryset.filter(created_at__gte=since)
    if min_trust is not None:
        queryset = queryset.filter(trust_score__gte=min_trust)
    return queryset.select_related("trace").order_by("-created_at", "-id").first()


def summary_fields(summary: SessionSummary) -> dict[str, Any]:
    """What a saved summary answers wherever it is shown (saved, loaded)."""
    return {
        "trace_id": str(summary.trace.trace_id),
        "trust_score": summary.trust_score,
        "risk": summary.risk,
        "decision": summary.decision,
        "tokens": summary.tokens,
        "signals": summary.signals,
        "saved_at": summary.created_at,
    }
