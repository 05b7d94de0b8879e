"""Admin of the audit trail: the injection log (``admin_log``: read-only for everyone,
superusers included: records are appended by services only and the tables refuse changes),
the review queue (``admin_reviews``), contradiction audit runs
(read-only) and findings, which staff resolve or dismiss with a reason."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from audit_app import (
    admin_log,  # noqa: F401  (registers the injection log)
    admin_reviews,  # noqa: F401  (registers the review queue)
)
from audit_app.admin_log import InjectionRecordAdmin as InjectionRecordAdmin
from audit_app.findings import finding_settle
from audit_app.models import AuditRun, ContradictionFinding, FindingState
from memoryproject.admin import ClientColumnAdmin, ServiceRowsAdmin


class _SettleForm(forms.ModelForm):
    """A person settles a finding: resolved or dismissed, always with a reason."""

    class Meta:
        model = ContradictionFinding
        fields = ["state", "reason"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("state") == FindingState.OPEN:
            raise forms.ValidationError("Choose resolved or dismissed to settle the finding.")
        if not str(data.get("reason") or "").strip():
            raise forms.ValidationError({"reason": "Say why the finding is settled this way."})
        return data


@admin.register(ContradictionFinding)
class ContradictionFindingAdmin(ServiceRowsAdmin):
    allow_change = True  # state and reason only, through finding_settle
    form = _SettleForm
    list_display = ["id", "project", "rule", "subject", "state", "settled_by", "last_seen_run"]
    list_filter = ["state", "rule", "project"]
    search_fields = ["subject", "evidence", "fact_ids"]
    list_select_related = ["project", "last_seen_run__project"]
    readonly_fields = [
        "project",
        "rule",
        "subject",
        "fact_ids",
        "evidence",
        "suggestion",
        "keep_fact",
        "first_run",
        "last_seen_run",
        "settled_by",
        "settled_at",
    ]
    fields = [*readonly_fields, "state", "reason"]

    def save_model(
        self, request: HttpRequest, obj: ContradictionFinding, form: Any, change: bool
    ) -> None:
        finding_settle(
            finding=obj,
            state=obj.state,
            by=request.user.get_username(),
            reason=obj.reason,
        )


@admin.register(AuditRun)
class AuditRunAdmin(ClientColumnAdmin, ServiceRowsAdmin):
    list_display = [
        "id",
        "project",
        "started_at",
        "as_of",
        "facts_checked",
        "findings",
        "auto_resolved",
        "channel",
    ]
    list_filter = ["project", "channel"]
    list_select_related = ["project"]
