"""Admin lists of traces and saved session summaries (read-only: they are written by services)."""

from __future__ import annotations

from django.contrib import admin

from memoryproject.admin import ServiceRowsAdmin
from sessions_app.models import SessionSummary, Trace


class _ReadOnly(ServiceRowsAdmin):
    allow_delete = True


@admin.register(Trace)
class TraceAdmin(_ReadOnly):
    list_display = [
        "trace_id",
        "created_at",
        "project",
        "model",
        "policy",
        "decision",
        "trust_score",
        "risk",
        "status_code",
    ]
    list_filter = ["decision", "policy", "project"]
    search_fields = ["trace_id", "model"]
    date_hierarchy = "created_at"
    list_select_related = ["project"]


@admin.register(SessionSummary)
class SessionSummaryAdmin(_ReadOnly):
    list_display = ["created_at", "project", "decision", "trust_score", "risk", "tokens"]
    list_filter = ["decision", "project"]
    search_fields = ["summary"]
    list_select_related = ["project"]
