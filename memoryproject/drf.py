"""DRF glue shared by every app: the error format and the project-choosing mixin.

Every error answers JSON ``{"code", "message", "fields"?}``; ``fields`` maps each offending field
to the rules it broke.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from memoryproject.auth import api_key_of
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.projects import Access, project_resolve


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors" and not prefix:
                name = "body"
            fields.update(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            fields[prefix or "body"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                fields.update(_flatten(item, f"{prefix}[{index}]"))
    else:
        fields[prefix or "body"] = [str(detail)]
    return fields


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response(exc.as_dict(), status=exc.status_code)
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        message = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        return Response(
            {"code": "invalid", "message": message, "fields": fields},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.ParseError):
        return Response(
            {
                "code": "parse_error",
                "message": f"body: {exc.detail}",
                "fields": {"body": [f"must be a JSON object ({exc.detail})"]},
            },
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        response.data = {
            "code": codes if isinstance(codes, str) else "error",
            "message": str(exc.detail),
        }
    return response


class ProjectScopedMixin:
    """Resolves the project of a request by the one convention (see memoryproject.projects)."""

    request: Request

    def resolve_project(self, access: Access, data: Any = None) -> Project:
        """The call's project. Writes name it in the body; reads in the ``project`` query
        parameter. A POST that only reads (plan, compile) passes its body as ``data``: its
        ``project`` field is used, else the query parameter."""
        slug: Any = None
        if access == "write" or data is not None:
            source = data if data is not None else self.request.data
            if not isinstance(source, dict):
                raise ApplicationError("body: must be a JSON object", field="body")
            slug = source.get("project")
        if access == "read" and not slug:
            slug = self.request.query_params.get("project")
        return project_resolve(slug=slug or None, api_key=api_key_of(self.request), access=access)

    def visible_project_ids(self) -> list[int] | None:
        """Project ids this request may read (None: all, for keyless trusted callers)."""
        api_key = api_key_of(self.request)
        if api_key is None:
            return None
        return [p.pk for p in api_key.projects.all()]
