"""The injection log in the console: a read-only list with a chain-status banner, filters
(a from/to range to the second, in UTC, and project, channel, client, source, status,
decision, mode), search by trace id, injection id, item id or prompt hash, export of the
filtered selection (CSV, JSON), and a detail page that answers "what did the agent get?".

Every page reads a constant number of queries whatever the page size: the project is joined,
the receipt's sources are prefetched for the links, and the detail reads one query per kind
of source."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from import_export.admin import ExportMixin
from import_export.formats import base_formats
from import_export.forms import ExportForm

from audit_app.console_selectors import chain_status, delivery_view
from audit_app.export import FormulaSafeCSV, InjectionRecordResource
from audit_app.models import InjectionRecord
from audit_app.receipt_sources import receipts_delivering
from memoryproject.admin import ClientColumnAdmin, ServiceRowsAdmin, time_column, utc_time_cell
from memoryproject.entitlements import client_shown
from memoryproject.timeutil import TimestampError, to_utc

_HEX = re.compile(r"^[0-9a-f]{8,64}$")
#: How many source links a list row shows before "+N more".
ROW_LINKS = 4


def parse_console_time(value: str) -> datetime:
    """A from/to bound: ISO-8601 with a zone, or without one (a datetime-local control's
    ``2026-11-30T16:00:12``, or to the minute), read as UTC."""
    text = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?", text):
        text = text + ("T00:00:00" if "T" not in text else "") + "+00:00"
    return to_utc(text)


class CreatedRangeFilter(admin.ListFilter):
    """From / to (inclusive, to the second, UTC) on the record's ``created_at``."""

    title = "created (UTC)"
    template = "admin/audit_app/created_range_filter.html"
    parameters = ("created_from", "created_to")

    def __init__(
        self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any
    ) -> None:
        super().__init__(request, params, model, model_admin)
        self.values: dict[str, str] = {}
        self.bounds: dict[str, datetime] = {}
        self.errors: list[str] = []
        for name in self.parameters:
            if name not in params:
                continue
            raw = params.pop(name)
            value = str(raw[-1] if isinstance(raw, list) else raw).strip()
            self.values[name] = value
            if not value:
                continue
            try:
                self.bounds[name] = parse_console_time(value)
            except TimestampError as exc:
                label = name.removeprefix("created_")
                self.errors.append(f"{label}: {exc}")
        self.other_params = [
            (key, value)
            for key, values in request.GET.lists()
            if key not in self.parameters and key != "p"
            for value in values
        ]

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str | None]:
        return list(self.parameters)

    def choices(self, changelist: ChangeList) -> Iterator[Any]:
        yield {
            "from": self.values.get("created_from", ""),
            "to": self.values.get("created_to", ""),
            "errors": self.errors,
            "other_params": self.other_params,
            "reset_url": changelist.get_query_string(remove=[*self.parameters, "p"]),
        }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if "created_from" in self.bounds:
            queryset = queryset.filter(created_at__gte=self.bounds["created_from"])
        if "created_to" in self.bounds:
            # Inclusive to the second: everything before the next second.
            end = self.bounds["created_to"].replace(microsecond=999999)
            queryset = queryset.filter(created_at__lte=end)
        return queryset


def admin_url(app: str, model: str, pk: int | str | uuid.UUID) -> str:
    # Quoted as the admin quotes keys: "fact_4c…" would otherwise read as an escape.
    return reverse(f"admin:{app}_{model}_change", args=[quote(pk)])


def _admin_link(app: str, model: str, pk: int | str, text: str) -> SafeString:
    return format_html('<a href="{}">{}</a>', admin_url(app, model, pk), text)


def _short(value: str) -> str:
    return value if len(value) <= 14 else value[:13] + "…"


@admin.register(InjectionRecord)
class InjectionRecordAdmin(ExportMixin, ClientColumnAdmin, ServiceRowsAdmin):
    change_list_template = "admin/audit_app/injectionrecord/change_list.html"
    change_form_template = "admin/audit_app/injectionrecord/change_form.html"
    resource_classes = [InjectionRecordResource]
    formats = [FormulaSafeCSV, base_formats.JSON]
    # Every column, always: a file missing a hashed field could not be verified.
    export_form_class = ExportForm
    list_display = [
        "seq",
        "created_cell",
        "project",
        "source",
        "status",
        "decision",
        "trust_score",
        "mode",
        "client",
        "trace_links",
        "item_links",
    ]
    list_display_links = ["seq"]
    list_filter = [
        CreatedRangeFilter,
        "project",
        "channel",
        "client",
        "source",
        "status",
        "decision",
        "mode",
    ]
    list_select_related = ["project"]
    list_per_page = 50
    search_fields = ["prompt_sha256"]  # the box; the matching is get_search_results'
    search_help_text = (
        "Search by trace id, injection id or seq, item id (fact_…, ep_…, a trace id), "
        "prompt SHA-256 (or its first 8+ hex digits) or record hash."
    )
    ordering = ["-seq"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[InjectionRecord]:
        return super().get_queryset(request).prefetch_related("sources")

    def get_fields(self, request: HttpRequest, obj: object = None) -> Any:
        return self.get_readonly_fields(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        # Every column as chained; times in ISO-8601 UTC to the second.
        times = {"generated_at": "generated_cell", "created_at": "created_cell"}
        names = [times.get(f.name, f.name) for f in InjectionRecord._meta.fields]
        return self.readonly_with_client(request, names)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[InjectionRecord], search_term: str
    ) -> tuple[QuerySet[InjectionRecord], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(record_search_q(term)), False

    # --- columns ---

    created_cell = time_column("created_at", "created")
    generated_cell = time_column("generated_at", "generated", sortable=False)

    @admin.display(description="traces")
    def trace_links(self, record: InjectionRecord) -> SafeString:
        by_trace = {s.item_id: s for s in record.sources.all() if s.kind in ("trace", "summary")}
        links = []
        for trace_id in record.trace_ids[:ROW_LINKS]:
            source = by_trace.get(trace_id)
            if source is not None and source.trace_id is not None:
                links.append(
                    _admin_link("sessions_app", "trace", source.trace_id, _short(trace_id))
                )
            elif source is not None and source.summary_id is not None:
                links.append(
                    _admin_link(
                        "sessions_app", "sessionsummary", source.summary_id, _short(trace_id)
                    )
                )
            else:  # not indexed: the trace list, searched by its id
                url = reverse("admin:sessions_app_trace_changelist") + f"?q={trace_id}"
                links.append(format_html('<a href="{}">{}</a>', url, _short(trace_id)))
        return _joined(links, len(record.trace_ids))

    @admin.display(description="facts and episodes")
    def item_links(self, record: InjectionRecord) -> SafeString:
        graph = [s for s in record.sources.all() if s.kind in ("fact", "episode")]
        links = []
        for source in graph[:ROW_LINKS]:
            model = "temporalfact" if source.kind == "fact" else "episode"
            pk = source.fact_id if source.kind == "fact" else source.episode_id
            if pk is None:
                links.append(format_html("{}", _short(source.item_id)))
            else:
                links.append(_admin_link("graph_app", model, pk, _short(source.item_id)))
        return _joined(links, len(graph))

    # --- pages ---

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), "chain_status": chain_status()}
        return super().changelist_view(request, extra_context)

    def change_form_context(
        self, request: HttpRequest, obj: InjectionRecord | None
    ) -> dict[str, Any]:
        if obj is None:
            return {}
        delivery = delivery_view(obj)
        source_urls = [
            admin_url(*source.admin) if source.admin else "" for source in delivery.sources
        ]
        return {
            "delivery": delivery,
            "source_urls": source_urls,
            "delivery_sources": list(zip(delivery.sources, source_urls, strict=True)),
            "delivery_created": utc_time_cell(obj.created_at),
            "delivery_client": client_shown(obj.client, user=request.user),
            "delivery_generated": utc_time_cell(obj.generated_at),
        }


def _joined(links: list[SafeString], total: int) -> SafeString:
    if not links:
        return format_html("{}", "—")
    more = total - len(links)
    body = format_html_join(", ", "{}", ((link,) for link in links))
    return format_html("{} (+{} more)", body, more) if more > 0 else body


def record_search_q(term: str) -> Q:
    """What a console search matches: an injection id or seq (digits), a trace id (UUID: the
    record's trace ids or a delivered source), a prompt SHA-256 or record hash (hex, or its
    first 8+ digits), or a delivered item's id (fact_…, ep_…)."""
    if term.isdigit():
        return Q(pk=int(term)) | Q(seq=int(term))
    try:
        trace_id = str(uuid.UUID(term))
    except ValueError:
        trace_id = ""
    if trace_id:
        return Q(trace_ids__icontains=trace_id) | receipts_delivering(trace_id)
    lowered = term.lower()
    if _HEX.fullmatch(lowered):
        if len(lowered) == 64:
            return Q(prompt_sha256=lowered) | Q(record_hash=lowered)
        return Q(prompt_sha256__startswith=lowered) | Q(record_hash__startswith=lowered)
    return receipts_delivering(term)
