"""REST doors of session memory: each is an operation (sessions_app.operations) served by
memoryproject.drf.OperationView, plus the trace list and detail reads."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryproject.drf import PROJECT_PARAM, OperationView, ProjectScopedMixin
from sessions_app import operations, selectors
from sessions_app.api.filters import TraceFilter
from sessions_app.contracts import TraceOut, TracePage
from sessions_app.models import Trace


class TraceListCreateView(OperationView):
    """GET: the project's traces, newest first. POST: record a trace."""

    operation = operations.TRACE_RECORD
    list_output = TracePage
    filterset_class = TraceFilter

    def get_queryset(self) -> QuerySet[Trace]:
        if getattr(self, "swagger_fake_view", False):  # OpenAPI: the rows' model, no request
            return Trace.objects.none()
        return selectors.trace_list(project_ids=[self.resolve_project("read").pk])

    def list_row(self, row: Trace) -> TraceOut:
        return selectors.trace_view(row)


class TraceDetailView(APIView, ProjectScopedMixin):
    @extend_schema(parameters=[PROJECT_PARAM], responses=TraceOut)
    def get(self, request: Request, trace_id: Any) -> Response:
        named = request.query_params.get("project")
        ids = [self.resolve_project("read").pk] if named else self.visible_project_ids()
        trace = selectors.trace_get(trace_id=trace_id, project_ids=ids)
        return Response(selectors.trace_view(trace).as_json())


class PlanView(OperationView):
    """Context injection from recent traces. Only reads memory (plus its receipt), so a
    read-scoped key may call it."""

    operation = operations.PLAN_CONTEXT


class SessionSaveView(OperationView):
    operation = operations.SESSION_SAVE


class SessionLoadView(OperationView):
    operation = operations.SESSION_LOAD
    method = "get"
