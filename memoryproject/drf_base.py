"""The DRF classes the settings name for every view: the JSON body parser and the pagination.

Kept apart from memoryproject.drf, which imports DRF's views: those read these settings when
they are defined, so a module they name must not import them back.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.metadata import SimpleMetadata
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import JSONParser
from rest_framework.request import Request

from memoryproject.contracts import (
    MAX_JSON_DEPTH,
    MAX_OFFSET,
    json_value_error,
    json_value_problem,
)
from memoryproject.errors import validation_error


class JsonNegotiation(DefaultContentNegotiation):
    """DRF's content negotiation, answering at once the question every API request asks: a
    view that renders JSON first, asked for JSON, anything (``*/*``) or nothing in particular
    (no Accept header, no format override), gets its first renderer, as the full negotiation
    would choose it. Any other request is negotiated in full (406 where nothing matches)."""

    def select_renderer(
        self, request: Request, renderers: Any, format_suffix: str | None = None
    ) -> Any:
        accept = request.META.get("HTTP_ACCEPT", "").strip()
        first = renderers[0] if renderers else None
        if (
            first is not None
            and first.media_type == "application/json"
            and accept in _ANY_JSON
            and not format_suffix
            and self.settings.URL_FORMAT_OVERRIDE not in request.query_params
        ):
            return first, first.media_type
        return super().select_renderer(request, renderers, format_suffix)

    def filter_renderers(self, renderers: Any, format: str) -> Any:
        """The renderers serving a ``?format=`` override; a format none serves is a 400 naming
        the parameter and the formats offered (DRF answers a bare 404 in no error's shape)."""
        matching = [renderer for renderer in renderers if renderer.format == format]
        if not matching:
            offered = ", ".join(sorted({renderer.format for renderer in renderers}))
            raise validation_error(self.settings.URL_FORMAT_OVERRIDE, f"must be one of {offered}")
        return matching


_ANY_JSON = frozenset({"", "*/*", "application/json"})


class JsonBodyParser(JSONParser):
    """DRF's JSON parser, plus the rules every body follows whatever the endpoint: nested at
    most MAX_JSON_DEPTH levels, and no lone surrogate (text no encoding can store) in any
    string or key."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(
                f"JSON nested more than {MAX_JSON_DEPTH} levels deep"
            ) from None
        problem = json_value_problem(data)
        if problem is not None:
            raise json_value_error(*problem)
        return data


def _query_int(name: str, raw: str, low: int, high: int) -> int:
    text = raw.strip()
    digits = text.removeprefix("-")  # one sign at most: int("--1") would raise
    value = int(text) if text.isascii() and digits.isdigit() and len(text) < 20 else None
    if value is None or not low <= value <= high:
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise validation_error(name, f"must be an integer from {low} to {high}, got '{shown}'")
    return value


class Pagination(LimitOffsetPagination):
    """limit/offset pages with a documented cap: ``limit`` 1..MAX_PAGE_SIZE (default
    PAGE_SIZE), ``offset`` 0..MAX_OFFSET; anything else is a 400 naming the parameter (an
    empty value is the default). The answer's ``next`` links the following page."""

    @property
    def max_limit(self) -> int:  # type: ignore[override]
        return int(settings.MEMORY_MAX_PAGE_SIZE)

    def get_limit(self, request: Request) -> int:
        raw = request.query_params.get(self.limit_query_param, "")
        if raw == "":
            return int(self.default_limit or 50)
        return _query_int(self.limit_query_param, raw, 1, self.max_limit)

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(self.offset_query_param, "")
        return 0 if raw == "" else _query_int(self.offset_query_param, raw, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET},
        }
        for param in params:
            param["schema"].update(bounds.get(param["name"], {}))
            if param["name"] == self.limit_query_param:
                param["description"] = (
                    f"Page size, 1 to {self.max_limit} (default {self.default_limit})."
                )
        return params


class Metadata(SimpleMetadata):
    """OPTIONS answers the view's name, description and media types. (DRF's default also
    describes a serializer's fields, which these views have none of: their inputs are
    documented in the OpenAPI schema.)"""

    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        return {}
