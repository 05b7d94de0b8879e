"""REST views of the knowledge graph: each resolves the project by the one convention, then
answers what a service or selector answers."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from graph_app import selectors, services
from graph_app.api import serializers as s
from graph_app.api.filters import EntityFilter, EpisodeFilter, FactFilter, parse_bool
from graph_app.models import Entity, Episode, TemporalFact
from memoryproject.auth import api_key_of
from memoryproject.drf import ProjectScopedMixin
from memoryproject.errors import validation_error
from memoryproject.projects import project_resolve

PROJECT_PARAM = OpenApiParameter(
    "project", str, description="Project slug (default: the key's single project or 'default')"
)


def _validated(serializer_class: type, data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    payload = dict(serializer.validated_data)
    payload.pop("project", None)
    return payload


class FactListCreateView(generics.ListAPIView, ProjectScopedMixin):
    """Facts of a project (GET, filtered and paginated) and fact assertion (POST)."""

    serializer_class = s.FactSerializer
    filterset_class = FactFilter

    def get_queryset(self) -> QuerySet[TemporalFact]:
        return selectors.facts_query(project=self.resolve_project("read"))

    @extend_schema(parameters=[PROJECT_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=s.FactUpsertSerializer,
        responses={201: s.FactUpsertResultSerializer, 200: s.FactUpsertResultSerializer},
    )
    def post(self, request: Request) -> Response:
        project = self.resolve_project("write")
        result = services.fact_upsert(
            project=project, **_validated(s.FactUpsertSerializer, request.data)
        )
        return Response(result, status=201 if result["created"] else 200)


class FactDetailView(APIView, ProjectScopedMixin):
    @extend_schema(parameters=[PROJECT_PARAM], responses=s.FactSerializer)
    def get(self, request: Request, fact_id: str) -> Response:
        fact = selectors.fact_get(fact_id=fact_id, project_ids=self._project_ids())
        return Response(selectors.fact_as_dict(fact))

    def _project_ids(self) -> list[int] | None:
        if self.request.query_params.get("project"):
            return [self.resolve_project("read").pk]
        return self.visible_project_ids()


class FactRetractView(APIView, ProjectScopedMixin):
    @extend_schema(request=s.FactRetractSerializer, responses=s.FactSerializer)
    def post(self, request: Request, fact_id: str) -> Response:
        payload = _validated(s.FactRetractSerializer, request.data)
        if isinstance(request.data, dict) and request.data.get("project"):
            project = self.resolve_project("write")
        else:
            fact = selectors.fact_get(fact_id=fact_id, project_ids=self.visible_project_ids())
            project = project_resolve(
                slug=fact.project.slug, api_key=api_key_of(request), access="write"
            )
        return Response(services.fact_retract(project=project, fact_id=fact_id, **payload))


class EpisodeListCreateView(generics.ListAPIView, ProjectScopedMixin):
    """Episodes of a project (GET, filtered and paginated) and episode recording (POST)."""

    serializer_class = s.EpisodeSerializer
    filterset_class = EpisodeFilter

    def get_queryset(self) -> QuerySet[Episode]:
        return selectors.episodes_query(project=self.resolve_project("read"))

    @extend_schema(parameters=[PROJECT_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=s.EpisodeRecordSerializer,
        responses={201: s.EpisodeRecordResultSerializer, 200: s.EpisodeRecordResultSerializer},
    )
    def post(self, request: Request) -> Response:
        project = self.resolve_project("write")
        result = services.episode_record(
            project=project, **_validated(s.EpisodeRecordSerializer, request.data)
        )
        return Response(result, status=201 if result["created"] else 200)


class EpisodeDetailView(APIView, ProjectScopedMixin):
    @extend_schema(parameters=[PROJECT_PARAM], responses=s.EpisodeSerializer)
    def get(self, request: Request, episode_id: str) -> Response:
        if request.query_params.get("project"):
            project_ids: list[int] | None = [self.resolve_project("read").pk]
        else:
            project_ids = self.visible_project_ids()
        return Response(selectors.episode_get(episode_id=episode_id, project_ids=project_ids))


class EntityListView(generics.ListAPIView, ProjectScopedMixin):
    """Entities of a project (GET) and setting an entity's kind, name and aliases (POST)."""

    serializer_class = s.EntitySerializer
    filterset_class = EntityFilter

    def get_queryset(self) -> QuerySet[Entity]:
        return selectors.entities_query(project=self.resolve_project("read"))

    @extend_schema(parameters=[PROJECT_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=s.EntityUpsertSerializer, responses=s.EntitySerializer)
    def post(self, request: Request) -> Response:
        project = self.resolve_project("write")
        return Response(
            services.entity_upsert(
                project=project, **_validated(s.EntityUpsertSerializer, request.data)
            )
        )


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise validation_error(name, f"must be an integer, got '{raw}'") from exc


class EntityDetailView(APIView, ProjectScopedMixin):
    @extend_schema(
        parameters=[
            PROJECT_PARAM,
            OpenApiParameter("max_hops", int, description="Ego-graph radius, 0..5 (default 2)"),
            OpenApiParameter(
                "include_superseded", bool, description="Also list history among facts"
            ),
        ],
        responses=s.EntityQueryResultSerializer,
    )
    def get(self, request: Request, entity_id: str) -> Response:
        project = self.resolve_project("read")
        max_hops = _int_param(request, "max_hops", 2)
        raw = request.query_params.get("include_superseded")
        include = parse_bool(raw, field="include_superseded") if raw else False
        return Response(
            selectors.entity_query(
                project=project,
                entity_id=entity_id,
                max_hops=max_hops,
                include_superseded=include,
            )
        )


class TimeTravelView(APIView, ProjectScopedMixin):
    @extend_schema(
        parameters=[
            PROJECT_PARAM,
            OpenApiParameter(
                "as_of", OpenApiTypes.DATETIME, required=True, description="Valid time"
            ),
            OpenApiParameter(
                "known_at", OpenApiTypes.DATETIME, description="Transaction time (default now)"
            ),
        ],
        responses=s.TimeTravelResultSerializer,
    )
    def get(self, request: Request) -> Response:
        project = self.resolve_project("read")
        return Response(
            selectors.graph_as_of(
                project=project,
                as_of=request.query_params.get("as_of"),  # type: ignore[arg-type]
                known_at=request.query_params.get("known_at"),
            )
        )


class IntegrityView(APIView, ProjectScopedMixin):
    @extend_schema(parameters=[PROJECT_PARAM], responses=s.IntegrityResultSerializer)
    def get(self, request: Request) -> Response:
        return Response(selectors.integrity_verify(project=self.resolve_project("read")))
