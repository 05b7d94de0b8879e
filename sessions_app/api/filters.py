"""Filters of GET /v1/traces: decision, model and a created_at range (the project is chosen by
the one project convention, see memoryproject.projects)."""

from __future__ import annotations

import django_filters

from sessions_app.models import DECISION_CHOICES, Trace


class TraceFilter(django_filters.FilterSet):
    decision = django_filters.ChoiceFilter(choices=DECISION_CHOICES)
    model = django_filters.CharFilter(field_name="model")
    policy = django_filters.CharFilter(field_name="policy")
    created_after = django_filters.IsoDateTimeFilter(
        field_name="created_at",
        lookup_expr="gte",
        label="Traces created at or after this ISO-8601 instant",
    )
    created_before = django_filters.IsoDateTimeFilter(
        field_name="created_at",
        lookup_expr="lt",
        label="Traces created before this ISO-8601 instant",
    )

    class Meta:
        model = Trace
        fields = ["decision", "model", "policy", "created_after", "created_before"]
