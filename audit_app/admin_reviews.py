"""The review queue in the admin: flagged contexts (``Review``) and contradiction findings
(``FindingReview``, the same rows as ``ContradictionFinding``), decided with a reason by staff
holding ``audit_app.decide_review``.

The rows are never edited through the admin's change form: each page shows what the reviewer
judges (reason, score, signals, sources with links, the exact text) and, while the item is
open, a decision form posting to ``<id>/decide/``, which calls the review service (the decision
is appended to the injection log there). A staff user without the permission sees the queue
(with the view permission) but no form, and a POST answers 403.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from audit_app.models import FindingReview, FindingState, Review, ReviewState
from audit_app.reviews import review_decide, review_finding_decide
from memoryproject.admin import ServiceRowsAdmin
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import iso
from sessions_app.models import Trace

DECIDE_PERMISSION = "audit_app.decide_review"


def can_decide(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff) and request.user.has_perm(
        DECIDE_PERMISSION
    )


def _decision_field(choices: list[tuple[str, str]]) -> forms.ChoiceField:
    """A reviewer's decision, one of ``choices``, as radio buttons."""
    return forms.ChoiceField(choices=choices, widget=forms.RadioSelect, label="Decision")


def _reason_field() -> forms.CharField:
    """Why a reviewer decided so: required, recorded in the injection log."""
    return forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        label="Reason",
        help_text="Required: say why. It is recorded in the injection log.",
    )


class ContextDecisionForm(forms.Form):
    decision = _decision_field(
        [("approve", "Approve: deliver on the next call"), ("reject", "Reject")]
    )
    reason = _reason_field()


class FindingDecisionForm(forms.Form):
    decision = _decision_field(
        [(FindingState.RESOLVED, "Resolve"), (FindingState.DISMISSED, "Dismiss")]
    )
    reason = _reason_field()


def _pretty(value: object) -> SafeString:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True))


def _receipt_link(injection_id: int | None) -> SafeString | str:
    if injection_id is None:
        return "—"
    url = reverse("admin:audit_app_injectionrecord_change", args=[injection_id])
    return format_html('<a href="{}">injection {}</a>', url, injection_id)


class _QueueAdmin(ServiceRowsAdmin):
    """View pages plus the decision form; the decision is the only write."""

    decision_form: type[forms.Form] = ContextDecisionForm
    open_state = "open"
    change_form_template = "admin/audit_app/review_change_form.html"

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return super().has_view_permission(request, obj) or can_decide(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) or can_decide(request)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        decide = path(
            "<int:object_id>/decide/",
            self.admin_site.admin_view(require_POST(self.decide_view)),
            name=f"{info[0]}_{info[1]}_decide",
        )
        return [decide, *super().get_urls()]

    def decide(self, request: HttpRequest, obj: Any, data: dict[str, Any]) -> None:
        """Records the form's decision on the row ``obj`` (its id) by the signed-in user."""
        by = request.user.get_username()
        self.decide_row(int(obj), decision=data["decision"], by=by, reason=data["reason"])

    def decide_row(self, row_id: int, *, decision: str, by: str, reason: str) -> None:
        raise NotImplementedError

    def decide_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not can_decide(request):
            raise PermissionDenied
        form = self.decision_form(request.POST)
        back = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[object_id]
        )
        if not form.is_valid():
            for field, errors in form.errors.items():
                self.message_user(
                    request, f"{field}: {' '.join(str(e) for e in errors)}", messages.ERROR
                )
            return HttpResponseRedirect(back)
        try:
            self.decide(request, object_id, form.cleaned_data)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(back)
        self.message_user(request, f"Decision recorded: {form.cleaned_data['decision']}.")
        return HttpResponseRedirect(back)

    def change_form_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        decidable = obj is not None and obj.state == self.open_state and can_decide(request)
        if not decidable:
            return {"decision_form": None}
        return {
            "decision_form": self.decision_form(),
            "decide_url": reverse(
                f"admin:{self.opts.app_label}_{self.opts.model_name}_decide", args=[obj.pk]
            ),
        }


class _StateFilter(admin.SimpleListFilter):
    """The queue opens on what waits for a decision ("open"); any state, or all, on demand."""

    title = "state"
    parameter_name = "state"
    states: tuple[str, ...] = ()

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(state, state) for state in self.states] + [("all", "all")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value() or "open"
        return queryset if value == "all" else queryset.filter(state=value)

    def choices(self, changelist: Any) -> Any:
        current = self.value() or "open"
        for lookup, title in self.lookup_choices:
            yield {
                "selected": current == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }


class ReviewStateFilter(_StateFilter):
    states = tuple(ReviewState.values)


class FindingStateFilter(_StateFilter):
    states = tuple(FindingState.values)


REVIEW_FIELDS: tuple[str, ...] = (
    "project",
    "source",
    "state",
    "created",
    "reason",
    "trust_score",
    "risk",
    "threshold",
    "decision",
    "signals_shown",
    "sources_shown",
    "text_shown",
    "flagged_receipt",
    "decided_by",
    "decided_at",
    "decision_reason",
    "decision_seq",
    "delivered_receipt",
    "delivered_at",
    "note",
)


@admin.register(Review)
class ReviewAdmin(_QueueAdmin):
    list_display = [
        "id",
        "created",
        "project",
        "source",
        "state",
        "trust_score",
        "threshold",
        "short_reason",
        "decided_by",
    ]
    list_filter = [ReviewStateFilter, "source", "project"]
    search_fields = ["reason", "text", "decided_by"]
    list_select_related = ["project"]
    fields = REVIEW_FIELDS
    readonly_fields = REVIEW_FIELDS

    def decide_row(self, row_id: int, *, decision: str, by: str, reason: str) -> None:
        review_decide(review_id=row_id, decision=decision, by=by, reason=reason)

    @admin.display(description="created (UTC)", ordering="created_at")
    def created(self, obj: Review) -> str:
        return iso(obj.created_at) or ""

    @admin.display(description="reason")
    def short_reason(self, obj: Review) -> str:
        return obj.reason if len(obj.reason) <= 120 else obj.reason[:117] + "..."

    @admin.display(description="signals")
    def signals_shown(self, obj: Review) -> SafeString:
        return _pretty(obj.signals)

    @admin.display(description="text to deliver")
    def text_shown(self, obj: Review) -> SafeString:
        return format_html('<pre id="review-text">{}</pre>', obj.text)

    @admin.display(description="flagged receipt")
    def flagged_receipt(self, obj: Review) -> SafeString | str:
        return _receipt_link(obj.flagged_injection_id)

    @admin.display(description="delivery receipt")
    def delivered_receipt(self, obj: Review) -> SafeString | str:
        return _receipt_link(obj.delivered_injection_id)

    @admin.display(description="sources (content hash when reviewed)")
    def sources_shown(self, obj: Review) -> SafeString:
        ids = []
        for item in obj.items:
            try:
                ids.append(uuid.UUID(item["id"]))
            except ValueError:
                continue
        traces = Trace.objects.filter(project_id=obj.project_id, trace_id__in=ids)
        pks = dict(traces.values_list("trace_id", "pk"))
        rows = []
        for item in obj.items:
            try:
                pk = pks.get(uuid.UUID(item["id"]))
            except ValueError:
                pk = None
            url = reverse("admin:sessions_app_trace_change", args=[pk]) if pk else ""
            rows.append((item["kind"], url or "#", item["id"], item["sha256"][:16]))
        return format_html(
            "<ul>{}</ul>",
            format_html_join("", '<li>{} <a href="{}">{}</a> <code>{}…</code></li>', rows),
        )


FINDING_FIELDS: tuple[str, ...] = (
    "project",
    "rule",
    "subject",
    "state",
    "fact_ids",
    "evidence",
    "suggestion",
    "keep_fact",
    "settled_by",
    "settled_at",
    "reason",
)


@admin.register(FindingReview)
class FindingReviewAdmin(_QueueAdmin):
    decision_form = FindingDecisionForm
    list_display = ["id", "project", "rule", "subject", "state", "settled_by", "evidence"]
    list_filter = [FindingStateFilter, "rule", "project"]
    search_fields = ["subject", "evidence"]
    list_select_related = ["project"]
    fields = FINDING_FIELDS
    readonly_fields = FINDING_FIELDS

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # The same rows as the findings' own admin: who may view those may view these.
        return super().has_view_permission(request, obj) or request.user.has_perm(
            "audit_app.view_contradictionfinding"
        )

    def decide_row(self, row_id: int, *, decision: str, by: str, reason: str) -> None:
        review_finding_decide(finding_id=row_id, decision=decision, by=by, reason=reason)


__all__ = ["FindingReviewAdmin", "ReviewAdmin", "ReviewState", "can_decide"]
