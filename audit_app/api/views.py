"""REST doors of the audit trail: the contradiction audit, auditors' reads of the injection
log (an admin-scope key) and the verification of log and graphs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit_app import operations, receipt_selectors
from audit_app.api.filters import InjectionFilter
from audit_app.contracts import InjectionDetail, InjectionPage
from audit_app.models import InjectionRecord
from memoryproject.drf import OperationView, ProjectScopedMixin
from memoryproject.models import Project


class ContradictionAuditView(OperationView):
    """Runs the contradiction auditor over the project's facts (see audit_contradictions)."""

    operation = operations.CONTRADICTIONS_AUDIT


class _AuditorView:
    """Auditors' reads: an admin-scope key, over the projects it is bound to."""

    required_scope = "admin"


class InjectionListView(_AuditorView, generics.ListAPIView, ProjectScopedMixin):
    """The injection log of the key's projects, newest first, filtered and paginated."""

    filterset_class = InjectionFilter

    def get_queryset(self) -> QuerySet[InjectionRecord]:
        if getattr(self, "swagger_fake_view", False):
            return InjectionRecord.objects.none()
        return receipt_selectors.injections_query(project_ids=self._project_ids())

    def _project_ids(self) -> list[int]:
        visible = self.visible_project_ids()
        return (
            visible if visible is not None else list(Project.objects.values_list("pk", flat=True))
        )

    @extend_schema(responses=InjectionPage)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        rows = [receipt_selectors.injection_view(r).as_json() for r in page or []]
        return self.get_paginated_response(rows)


class InjectionDetailView(_AuditorView, APIView, ProjectScopedMixin):
    """One receipt: the text as delivered and, per source, whether it changed since."""

    @extend_schema(responses=InjectionDetail)
    def get(self, request: Request, record_id: int) -> Response:
        visible = self.visible_project_ids()
        ids = visible if visible is not None else list(Project.objects.values_list("pk", flat=True))
        detail = receipt_selectors.injection_detail(record_id=record_id, project_ids=ids)
        return Response(detail.as_json())


class AuditVerifyView(OperationView):
    """The injection log and the key's projects' graphs, verified against their heads and the
    latest stored checkpoint (an admin-scope key). The whole log's figures, under `auditor`,
    only for the auditor role: an admin key bound to every project. `?project=` narrows the
    answer to one of the key's projects."""

    operation = operations.AUDIT_VERIFY
    method = "get"
