"""Query filters of the graph lists. Timestamps and booleans are parsed strictly: a naive or
malformed timestamp, or a boolean other than true/false, is a 400 naming the parameter."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Q, QuerySet

from graph_app.models import EpisodeCategory
from memoryproject.errors import validation_error
from memoryproject.timeutil import parse_aware_datetime


def parse_bool(value: Any, *, field: str) -> bool:
    text = str(value).strip().lower()
    if text in {"true", "1", "yes"}:
        return True
    if text in {"false", "0", "no"}:
        return False
    raise validation_error(field, f"must be true or false, got '{value}'")


class FactFilter(django_filters.FilterSet):
    subject = django_filters.CharFilter(field_name="subject__slug", help_text="Subject entity id")
    predicate = django_filters.CharFilter(field_name="predicate")
    object_entity = django_filters.CharFilter(field_name="object_entity__slug")
    active = django_filters.CharFilter(method="filter_active", help_text="true or false")
    valid_at = django_filters.CharFilter(
        method="filter_valid_at", help_text="ISO-8601 with timezone: facts valid at that time"
    )

    def filter_active(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(valid_until__isnull=parse_bool(value, field="active"))

    def filter_valid_at(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        at = parse_aware_datetime(value, field="valid_at")
        return queryset.filter(valid_from__lte=at).filter(
            Q(valid_until__isnull=True) | Q(valid_until__gt=at)
        )


class EpisodeFilter(django_filters.FilterSet):
    category = django_filters.ChoiceFilter(choices=EpisodeCategory.choices)
    entity = django_filters.CharFilter(
        field_name="entities__slug", distinct=True, help_text="Episodes mentioning this entity"
    )
    file = django_filters.CharFilter(
        method="filter_file", help_text="A file path, or a directory: episodes touching it"
    )
    occurred_after = django_filters.CharFilter(
        method="filter_after", help_text="ISO-8601 with timezone (inclusive)"
    )
    occurred_before = django_filters.CharFilter(
        method="filter_before", help_text="ISO-8601 with timezone (exclusive)"
    )

    def filter_file(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        path = value.strip().rstrip("/")
        return queryset.filter(
            Q(files__path=path) | Q(files__path__startswith=path + "/")
        ).distinct()

    def filter_after(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(occurred_at__gte=parse_aware_datetime(value, field="occurred_after"))

    def filter_before(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(occurred_at__lt=parse_aware_datetime(value, field="occurred_before"))


class EntityFilter(django_filters.FilterSet):
    kind = django_filters.CharFilter(field_name="kind")
    q = django_filters.CharFilter(method="filter_q", help_text="Part of the id or name")

    def filter_q(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(slug__icontains=value) | Q(name__icontains=value))
