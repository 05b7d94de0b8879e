"""Reads of traces and saved summaries, always within one project."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from memoryproject.errors import NotFoundError
from memoryproject.models import Project
from sessions_app.contracts import TraceOut
from sessions_app.domain.context import TraceView
from sessions_app.models import SessionSummary, Trace

# Only what context extraction reads: keeps the hot /v1/plan query narrow.
_PLAN_COLUMNS = ("trace_id", "model", "trust_score", "risk", "metadata")


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
        return queryset.get(trace_id=uuid.UUID(str(trace_id)))
    except (Trace.DoesNotExist, ValueError) as exc:
        raise NotFoundError(f"trace_id: no trace '{trace_id}'", field="trace_id") from exc


def traces_recent(*, project: Project, n: int) -> list[TraceView]:
    """The n most recent traces of a project, newest first (served by trace_project_recent)."""
    rows = (
        Trace.objects.filter(project=project)
        .order_by("-created_at", "-id")
        .values_list(*_PLAN_COLUMNS)[:n]
    )
    return [
        TraceView(
            trace_id=str(trace_id),
            model=model,
            trust_score=trust,
            risk=risk,
            metadata=metadata if isinstance(metadata, dict) else {},
        )
        for trace_id, model, trust, risk, metadata in rows
    ]


def trace_view(trace: Trace) -> TraceOut:
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
