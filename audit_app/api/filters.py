"""Filters of GET /v1/audit/injections: the one definition of how auditors narrow the log."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from audit_app.models import InjectionRecord
from audit_app.receipt_sources import receipts_delivering
from sessions_app.api.filters import AwareIsoDateTimeFilter


class InjectionFilter(django_filters.FilterSet):
    created_after = AwareIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = AwareIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    project = django_filters.CharFilter(field_name="project__slug")
    channel = django_filters.CharFilter()
    client = django_filters.CharFilter(lookup_expr="icontains")
    source = django_filters.CharFilter()
    status = django_filters.CharFilter()
    decision = django_filters.CharFilter()
    prompt_sha256 = django_filters.CharFilter()
    trace = django_filters.CharFilter(method="filter_trace", help_text="A trace id it used")
    item = django_filters.CharFilter(
        method="filter_item", help_text="A fact, episode, trace or summary id it delivered"
    )

    class Meta:
        model = InjectionRecord
        fields: list[str] = []

    def filter_trace(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(receipts_delivering(value, kinds=("trace", "summary")))

    def filter_item(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(receipts_delivering(value))
