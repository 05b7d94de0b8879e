"""Query filters of the graph lists: the one definition of how each list narrows. Timestamps and
booleans follow the rules of every other input (memoryproject.contracts): a naive or malformed
timestamp, or a boolean other than true/false, is a 400 naming the parameter."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import django_filters
from django.db.models import Q, QuerySet
from pydantic_core import PydanticCustomError

from graph_app.models import EpisodeCategory
from graph_app.visibility import fact_visible, fact_visible_now
from memoryproject.contracts import aware_datetime, parse_bool
from memoryproject.errors import validation_error

T = TypeVar("T")


def _parameter(name: str, rule: Callable[[object], T], value: str) -> T:
    """``value`` of query parameter ``name`` read by ``rule``, or a 400 naming the parameter."""
    try:
        return rule(value)
    except PydanticCustomError as exc:
        raise validation_error(name, str(exc)) from None


def _instant(name: str, value: str) -> datetime:
    return _parameter(name, aware_datetime, value)


class FactFilter(django_filters.FilterSet):
    subject = django_filters.CharFilter(field_name="subject__slug", help_text="Subject entity id")
    predicate = django_filters.CharFilter(field_name="predicate")
    object_entity = django_filters.CharFilter(field_name="object_entity__slug")
    active = django_filters.CharFilter(
        method="filter_active",
        help_text="true: the facts valid now (the current truth); false: every other fact",
    )
    valid_at = django_filters.CharFilter(
        method="filter_valid_at", help_text="ISO-8601 with timezone: facts valid at that time"
    )

    def filter_active(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if _parameter("active", parse_bool, value):
            return queryset.filter(fact_visible_now())
        return queryset.exclude(fact_visible_now())

    def filter_valid_at(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(fact_visible(_instant("valid_at", value)))


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
        return queryset.filter(occurred_at__gte=_instant("occurred_after", value))

    def filter_before(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(occurred_at__lt=_instant("occurred_before", value))


class EntityFilter(django_filters.FilterSet):
    kind = django_filters.CharFilter(field_name="kind")
    q = django_filters.CharFilter(method="filter_q", help_text="Part of the id or name")

    def filter_q(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(slug__icontains=value) | Q(name__icontains=value))
