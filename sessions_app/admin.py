"""Admin lists of traces and saved session summaries: read-only, written by the services and
never deleted here (receipts point to them; content is removed only by erasure)."""

from __future__ import annotations

from django.contrib import admin

from memoryproject.admin import ServiceRowsAdmin
from sessions_app.models import SessionSummary, Trace


@admin.register(Trace)
class TraceAdmin(ServiceRowsAdmin):
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
class SessionSummaryAdmin(ServiceRowsAdmin):
    list_display = ["created_at", "project", "decision", "trust_score", "risk", "tokens"]
    list_filter = ["decision", "project"]
    search_fields = ["summary"]
    list_select_related = ["project"]
