"""REST door of the context compiler: ``POST /v1/graph/compile``.

A POST because the query can be long, but it only reads: a read-scoped key may call it, and the
project is resolved with read access, from the body's ``project`` or the query parameter.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from graph_app.compiler import context_compile
from memoryproject.drf import ProjectScopedMixin
from memoryproject.errors import ApplicationError

_REQUEST = inline_serializer(
    "ContextCompileRequest",
    {
        "project": serializers.CharField(required=False, help_text="Project slug"),
        "query": serializers.CharField(help_text="What the agent is about to work on"),
        "max_tokens": serializers.IntegerField(
            required=False, default=1200, min_value=64, max_value=32000
        ),
        "as_of": serializers.DateTimeField(required=False, help_text="Valid time (ISO-8601, tz)"),
        "known_at": serializers.DateTimeField(
            required=False, help_text="Transaction time (ISO-8601, tz)"
        ),
        "include_superseded": serializers.BooleanField(required=False, default=False),
    },
)
_ITEMS = inline_serializer(
    "ContextCompileItem",
    many=True,
    fields={
        "kind": serializers.ChoiceField(choices=["fact", "episode"]),
        "id": serializers.CharField(),
        "external_id": serializers.CharField(
            allow_null=True, help_text="The episode's own id when it has one (cited by it)"
        ),
        "score": serializers.FloatField(),
        "tokens": serializers.IntegerField(),
        "citation": serializers.CharField(),
        "truncated": serializers.BooleanField(),
    },
)
_RESPONSE = inline_serializer(
    "ContextCompileResult",
    {
        "project": serializers.CharField(),
        "query": serializers.CharField(),
        "markdown": serializers.CharField(),
        "token_count": serializers.IntegerField(),
        "max_tokens": serializers.IntegerField(),
        "as_of": serializers.DateTimeField(allow_null=True),
        "known_at": serializers.DateTimeField(allow_null=True),
        "include_superseded": serializers.BooleanField(),
        "revision": serializers.IntegerField(),
        "items": _ITEMS,
        "citations": serializers.ListField(child=serializers.CharField()),
        "suppressed_stale": serializers.IntegerField(),
    },
)


class ContextCompileView(APIView, ProjectScopedMixin):
    """The most relevant memory for a query, packed under a token budget, every line cited."""

    required_scope = "read"

    @extend_schema(request=_REQUEST, responses=_RESPONSE)
    def post(self, request: Request) -> Response:
        body: Any = request.data
        if not isinstance(body, dict):
            raise ApplicationError("body: must be a JSON object", field="body")
        project = self.resolve_project("read", body)
        return Response(
            context_compile(
                project=project,
                query=body.get("query"),  # type: ignore[arg-type]
                max_tokens=body.get("max_tokens", 1200),
                as_of=body.get("as_of"),
                known_at=body.get("known_at"),
                include_superseded=body.get("include_superseded", False),
            )
        )
