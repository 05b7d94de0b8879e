"""Facts, episodes and entities as their typed outputs (``graph_app.contracts``, real
datetimes; adapters render them with ``as_json()``): the view of one row, the finders by id or
citation (404 outside the caller's projects), the single reads and recent episodes of the MCP
tools, and the list queries of the API. List queries only scope and order: their filters are
the FilterSets of ``graph_app.api.filters``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, overload

from django.db.models import Model, QuerySet

from graph_app.contracts.entities import EntityOut
from graph_app.contracts.episodes import EpisodeGetInput, EpisodeOut, EpisodePreview, RecentEpisodes
from graph_app.contracts.facts import FactGetInput, FactOut
from graph_app.domain.render import cited_id
from graph_app.models import Entity, Episode, TemporalFact
from graph_app.quarantine_reads import episodes_held, facts_held
from graph_app.record_canonical import (
    EPISODE_VALUE_FIELDS,
    FACT_RELATED,
    FACT_VALUE_FIELDS,
    fact_fields,
    instance_row,
)
from memoryproject.contracts import takes
from memoryproject.errors import NotFoundError
from memoryproject.models import Project

M = TypeVar("M", bound=Model)


E = TypeVar("E", bound=EpisodeOut)


def fact_view(fact: TemporalFact) -> FactOut:
    return FactOut(
        **fact_fields(instance_row(fact, FACT_VALUE_FIELDS)),
        project=fact.project.slug,
        status=fact.status,
        sha256=fact.sha256,
        revision=fact.revision,
    )


@overload
def episode_view(episode: Episode) -> EpisodeOut: ...


@overload
def episode_view(episode: Episode, output: type[E], **extra: Any) -> E: ...


def episode_view(
    episode: Episode, output: type[EpisodeOut] = EpisodeOut, **extra: Any
) -> EpisodeOut:
    """The episode as ``output``: EpisodeOut, or a model extending it with the fields
    ``extra`` gives (which may also replace the episode's own)."""
    fields = instance_row(episode, EPISODE_VALUE_FIELDS)
    fields.update(project=episode.project.slug, sha256=episode.sha256, revision=episode.revision)
    return output(**{**fields, **extra})


def entity_view(entity: Entity) -> EntityOut:
    return EntityOut(
        id=entity.slug,
        kind=entity.kind,
        name=entity.name,
        aliases=list(entity.aliases),
        created_at=entity.created_at,
    )


def facts_query(*, project: Project) -> QuerySet[TemporalFact]:
    """The project's facts, oldest recorded first (filtered by graph_app.api.filters)."""
    qs = TemporalFact.objects.filter(project=project).select_related(*FACT_RELATED)
    return qs.order_by("recorded_at", "id")


def episodes_query(*, project: Project) -> QuerySet[Episode]:
    """The project's episodes, latest occurred first (filtered by graph_app.api.filters)."""
    qs = Episode.objects.filter(project=project).select_related("project")
    return qs.order_by("-occurred_at", "id")


def entities_query(*, project: Project) -> QuerySet[Entity]:
    """The project's entities by id (filtered by graph_app.api.filters)."""
    return Entity.objects.filter(project=project).order_by("slug")


def _visible(
    rows: QuerySet[M], pk: str, project_ids: Iterable[int] | None, *, field: str, noun: str
) -> M:
    qs = rows.filter(pk=pk)
    if project_ids is not None:
        qs = qs.filter(project_id__in=list(project_ids))
    row = qs.first()
    if row is None:
        raise NotFoundError(f"{field}: no {noun} '{pk}'", field=field)
    return row


def fact_find(*, fact_id: str, project_ids: Iterable[int] | None) -> TemporalFact:
    """A fact by id, or by its citation (``[FACT:fact_...]``), within ``project_ids`` (None:
    any project), or 404."""
    facts = TemporalFact.objects.select_related(*FACT_RELATED)
    return _visible(facts, cited_id(fact_id), project_ids, field="fact_id", noun="fact")


def episode_find(*, episode_id: str, project_ids: Iterable[int] | None) -> Episode:
    """An episode by its id, its own ``external_id`` or its citation as a bundle shows it
    (``[ADR:ADR-12]``), within ``project_ids`` (None: any project), or 404. An internal id
    wins over an external one of the same text."""
    reference = cited_id(episode_id)
    episodes = Episode.objects.select_related("project")
    if project_ids is not None:
        episodes = episodes.filter(project_id__in=list(project_ids))
    found = episodes.filter(pk=reference).first() or (
        episodes.filter(external_id=reference).order_by("project_id").first()
    )
    if found is None:
        raise NotFoundError(f"episode_id: no episode '{episode_id}'", field="episode_id")
    return found


@takes(FactGetInput)
def fact_get(*, project: Project, params: FactGetInput) -> FactOut:
    fact = fact_view(fact_find(fact_id=params.fact_id, project_ids=[project.pk]))
    return facts_held(project, [fact])[0]


@takes(EpisodeGetInput)
def episode_get(*, project: Project, params: EpisodeGetInput) -> EpisodeOut:
    episode: EpisodeOut = episode_view(
        episode_find(episode_id=params.episode_id, project_ids=[project.pk])
    )
    return episodes_held(project, [episode])[0]


def episodes_recent(*, project: Project, limit: int, preview_chars: int) -> RecentEpisodes:
    """The ``limit`` latest episodes, their content cut to ``preview_chars``."""
    previews = []
    for episode in episodes_query(project=project)[:limit]:
        content = episode.content
        previews.append(
            episode_view(
                episode,
                EpisodePreview,
                content=content[:preview_chars],
                content_truncated=len(content) > preview_chars,
            )
        )
    previews = episodes_held(project, previews)
    return RecentEpisodes(project=project.slug, count=len(previews), episodes=previews)
