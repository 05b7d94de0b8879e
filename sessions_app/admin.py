"""Admin lists of traces and saved session summaries: read-only, written by the services and
never deleted here (receipts point to them; content is removed only by erasure)."""

from __future__ import annotations

from django.contrib import admin

from memoryproject.admin import ServiceRowsAdmin, time_column
from sessions_app.models import SessionSummary, Trace
from sessions_app.selectors import TRACE_COLUMNS


@admin.register(Trace)
class TraceAdmin(ServiceRowsAdmin):
    # The recorded columns (the metadata aside), the creation time as its cell, and the project.
    list_display = [
        "trace_id",
        "created_cell",
        "project",
        *(c for c in TRACE_COLUMNS if c not in ("trace_id", "created_at", "metadata")),
    ]
    list_filter = ["decision", "policy", "project"]
    search_fields = ["trace_id", "model"]
    date_hierarchy = "created_at"
    list_select_related = ["project"]
    created_cell = time_column("created_at", "created")


@admin.register(SessionSummary)
class SessionSummaryAdmin(ServiceRowsAdmin):
    list_display = [
        "__str__",
        "created_cell",
        "project",
        "decision",
        "trust_score",
        "risk",
        "tokens",
    ]
    list_filter = ["decision", "project"]
    search_fields = ["summary", "trace__trace_id"]
    list_select_related = ["project", "trace"]
    created_cell = time_column("created_at", "created")
