"""REST adapters for session memory: each view resolves the project, hands the request's values
to a service or selector unchanged (services validate) and answers the service's dict."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryproject.auth import api_key_of
from memoryproject.drf import ProjectScopedMixin
from memoryproject.errors import ApplicationError
from sessions_app import selectors, services
from sessions_app.api import serializers as s
from sessions_app.api.filters import TraceFilter

PROJECT_PARAM = OpenApiParameter(
    "project", str, description="Project slug (default: the key's single project or 'default')"
)
PLAN_FIELDS = ("n", "trust_threshold", "mode", "project")


def _body(request: Request) -> dict[str, Any]:
    try:
        data = request.data
    except exceptions.UnsupportedMediaType as exc:
        raise ApplicationError(
            "body: must be JSON sent with 'Content-Type: application/json', "
            f"got '{request.content_type}'",
            field="body",
        ) from exc
    if not isinstance(data, dict):
        raise ApplicationError("body: must be a JSON object", field="body")
    return dict(data)


def _client(request: Request) -> str:
    api_key = api_key_of(request)
    return api_key.label if api_key is not None else ""


def _number_param(request: Request, name: str) -> Any:
    """A query parameter as a number, leaving range checks to the service."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw) if name == "max_age_days" else float(raw)
    except ValueError as exc:
        kind = "an integer" if name == "max_age_days" else "a number"
        raise ApplicationError(f"{name}: must be {kind}, got '{raw}'", field=name) from exc


class TraceListCreateView(generics.ListAPIView, ProjectScopedMixin):
    """GET: the project's traces, newest first. POST: record a trace."""

    serializer_class = s.TraceSerializer
    filterset_class = TraceFilter

    def get_queryset(self):  # type: ignore[no-untyped-def]
        project = self.resolve_project("read")
        return selectors.trace_list(project_ids=[project.pk])

    @extend_schema(parameters=[PROJECT_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=s.TraceCreateRequest, responses={201: s.TraceSerializer})
    def post(self, request: Request) -> Response:
        body = _body(request)
        project = self.resolve_project("write", body)
        body.pop("project", None)
        return Response(
            services.trace_record(project=project, **body), status=status.HTTP_201_CREATED
        )


class TraceDetailView(APIView, ProjectScopedMixin):
    @extend_schema(responses=s.TraceSerializer)
    def get(self, request: Request, trace_id: Any) -> Response:
        trace = selectors.trace_get(trace_id=trace_id, project_ids=self.visible_project_ids())
        return Response(selectors.trace_as_dict(trace))


class PlanView(APIView, ProjectScopedMixin):
    """Context injection from recent traces. Only reads memory (plus its receipt), so a
    read-scoped key may call it."""

    required_scope = "read"

    @extend_schema(request=s.PlanRequest, responses=s.PlanResponse)
    def post(self, request: Request) -> Response:
        body = _body(request)
        unknown = sorted(set(body) - set(PLAN_FIELDS))
        if unknown:
            raise ApplicationError(
                f"{unknown[0]}: unknown field (allowed: {', '.join(PLAN_FIELDS)})",
                field=unknown[0],
            )
        project = self.resolve_project("read", body)
        body.pop("project", None)
        return Response(
            services.plan_context(project=project, channel="rest", client=_client(request), **body)
        )


class SessionSaveView(APIView, ProjectScopedMixin):
    @extend_schema(request=s.SaveRequest, responses={201: s.SaveResponse})
    def post(self, request: Request) -> Response:
        body = _body(request)
        project = self.resolve_project("write", body)
        if "summary" not in body:
            raise ApplicationError("summary: is required", field="summary")
        return Response(
            services.session_save(project=project, summary=body["summary"]),
            status=status.HTTP_201_CREATED,
        )


class SessionLoadView(APIView, ProjectScopedMixin):
    @extend_schema(
        parameters=[
            PROJECT_PARAM,
            OpenApiParameter("threshold", float, description="Minimum trust score (default 0.45)"),
            OpenApiParameter(
                "max_age_days", int, description="Maximum age in days (default: setting, 14)"
            ),
        ],
        responses=s.LoadResponse,
    )
    def get(self, request: Request) -> Response:
        project = self.resolve_project("read")
        threshold = _number_param(request, "threshold")
        return Response(
            services.session_load(
                project=project,
                threshold=0.45 if threshold is None else threshold,
                max_age_days=_number_param(request, "max_age_days"),
                channel="rest",
                client=_client(request),
            )
        )
