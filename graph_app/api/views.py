"""REST doors of the knowledge graph: each is an operation (graph_app.operations) served by
memoryproject.drf.OperationView; the collection views also list their rows on GET."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from django.db.models import QuerySet

from graph_app import operations, record_views
from graph_app.api.filters import EntityFilter, EpisodeFilter, FactFilter
from graph_app.contracts.pages import EntityPage, EpisodePage, FactPage
from graph_app.models import Episode, TemporalFact
from memoryproject.auth import api_key_of
from memoryproject.contracts import Output
from memoryproject.drf import OperationView
from memoryproject.models import Project
from memoryproject.projects import project_resolve


class ProjectRows(Protocol):
    """A selector of one project's rows (``record_views.facts_query``, ...)."""

    def __call__(self, *, project: Project) -> QuerySet[Any]: ...


class RowOutput(Protocol):
    """The output of one listed row (``record_views.fact_view``, ...)."""

    def __call__(self, row: Any, /) -> Output: ...


class ItemProjectView(OperationView):
    """An operation on the one item its URL names: unless the call names a project, it acts on
    the item's own project, found among the projects the caller can see (404 otherwise)."""

    #: The selector finding the item by the URL's argument within the given project ids.
    find: ClassVar[Callable[..., TemporalFact | Episode]]

    def project_for(self, data: dict[str, Any] | None) -> Project:
        named = data if data is not None else self.request.query_params
        if named.get("project"):
            return super().project_for(data)
        item = type(self).find(**self.kwargs, project_ids=self.visible_project_ids())
        api_key = api_key_of(self.request)
        return project_resolve(
            slug=item.project.slug, api_key=api_key, access=self.operation.access
        )


class CollectionView(OperationView):
    """A POST operation's view that also lists the project's rows on GET, filtered by its
    FilterSet and paginated."""

    #: The selector of the project's rows, and the selector of one row's output.
    rows: ClassVar[ProjectRows]
    row: ClassVar[RowOutput]

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):  # OpenAPI: the rows' model, no request
            return type(self).rows(project=Project(pk=0)).none()
        return type(self).rows(project=self.resolve_project("read"))

    def list_row(self, row: Any) -> Output:
        return type(self).row(row)


class FactListCreateView(CollectionView):
    """GET: the project's facts, filtered and paginated. POST: assert a fact."""

    operation = operations.FACT_UPSERT
    list_output = FactPage
    filterset_class = FactFilter
    rows = staticmethod(record_views.facts_query)
    row = staticmethod(record_views.fact_view)


class FactDetailView(ItemProjectView):
    operation = operations.FACT_GET
    method = "get"
    find = staticmethod(record_views.fact_find)


class FactRetractView(ItemProjectView):
    operation = operations.FACT_RETRACT
    find = staticmethod(record_views.fact_find)


class EpisodeListCreateView(CollectionView):
    """GET: the project's episodes, filtered and paginated. POST: record an episode."""

    operation = operations.EPISODE_RECORD
    list_output = EpisodePage
    filterset_class = EpisodeFilter
    rows = staticmethod(record_views.episodes_query)
    row = staticmethod(record_views.episode_view)


class EpisodeDetailView(ItemProjectView):
    operation = operations.EPISODE_GET
    method = "get"
    find = staticmethod(record_views.episode_find)


class EntityListView(CollectionView):
    """GET: the project's entities. POST: set an entity's kind, name and aliases."""

    operation = operations.ENTITY_UPSERT
    list_output = EntityPage
    filterset_class = EntityFilter
    rows = staticmethod(record_views.entities_query)
    row = staticmethod(record_views.entity_view)


class EntityDetailView(OperationView):
    """An entity with its facts, history, episodes and ego graph."""

    operation = operations.ENTITY_QUERY
    method = "get"


class TimeTravelView(OperationView):
    """The facts valid at as_of as they were known at known_at, with a snapshot hash."""

    operation = operations.TIME_TRAVEL
    method = "get"


class IntegrityView(OperationView):
    """Every fact's and episode's hash recomputed, and the Merkle root over them."""

    operation = operations.INTEGRITY_VERIFY
    method = "get"
