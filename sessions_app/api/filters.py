"""Filters of GET /v1/traces: decision, model, policy and a created_at range (the project is
chosen by the one project convention, see memoryproject.projects)."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField

from memoryproject.timeutil import TimestampError, to_utc
from sessions_app.models import DECISION_CHOICES, Trace


class AwareIsoDateTimeField(IsoDateTimeField):
    """ISO-8601 with a timezone, like every other timestamp input: a naive one is refused
    rather than guessed."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip():
            try:
                return to_utc(value)
            except TimestampError as exc:
                # The rule quotes the value: passed as a parameter, a '%' in it is not read as
                # a placeholder when django-filter formats the message (a 500 otherwise).
                raise forms.ValidationError("%(rule)s", params={"rule": str(exc)}) from exc
        return super().to_python(value)


class AwareIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = AwareIsoDateTimeField


class TraceFilter(django_filters.FilterSet):
    decision = django_filters.ChoiceFilter(choices=DECISION_CHOICES)
    model = django_filters.CharFilter(field_name="model")
    policy = django_filters.CharFilter(field_name="policy")
    created_after = AwareIsoDateTimeFilter(
        field_name="created_at",
        lookup_expr="gte",
        label="Traces created at or after this ISO-8601 instant (with a timezone)",
    )
    created_before = AwareIsoDateTimeFilter(
        field_name="created_at",
        lookup_expr="lt",
        label="Traces created before this ISO-8601 instant (with a timezone)",
    )

    class Meta:
        model = Trace
        fields = ["decision", "model", "policy", "created_after", "created_before"]
