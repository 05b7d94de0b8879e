"""Read-only admin list of the injection log: records are appended by services only."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from audit_app.models import InjectionRecord


@admin.register(InjectionRecord)
class InjectionRecordAdmin(admin.ModelAdmin):
    list_display = [
        "seq",
        "created_at",
        "project",
        "source",
        "channel",
        "client",
        "status",
        "decision",
        "trust_score",
        "threshold",
        "mode",
    ]
    list_filter = ["source", "status", "decision", "channel", "project"]
    search_fields = ["client", "prompt_sha256", "record_hash"]
    ordering = ["-seq"]

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return [f.name for f in InjectionRecord._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
