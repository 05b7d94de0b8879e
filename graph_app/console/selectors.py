"""Reads of the memory browser: an entity's page (its facts as of a date, its history on both
time axes, its episodes and its 2-hop neighbourhood) and the entity list.

Every list is paginated and loads its related rows in the same query, so a page costs the same
few queries whatever the size of the graph (tests/graph_app/test_console.py counts them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet

from graph_app.console.contracts import EntityBrowseInput, EntityListInput
from graph_app.contracts.entities import EgoGraph
from graph_app.contracts.facts import FactOut
from graph_app.domain.drawing import Bar, GraphDrawing, TimeScale, radial_layout, time_scale
from graph_app.entity_reads import entity_neighbourhood
from graph_app.models import Entity, Episode, TemporalFact
from graph_app.time_travel import facts_visible_at
from graph_app.visibility import episode_visible
from memoryproject.errors import NotFoundError
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

FACTS_PER_PAGE = 50
HISTORY_PER_PAGE = 25
EPISODES_PER_PAGE = 10
ENTITIES_PER_PAGE = 50
NEIGHBOURHOOD_HOPS = 2
DRAWN_NODES = 40


@dataclass(frozen=True)
class ShownFact:
    """A fact as the page shows it as of the chosen date (its times as then known)."""

    id: str
    subject: str
    predicate: str
    object_value: str
    object_entity: str | None
    valid_from: datetime
    valid_until: datetime | None
    recorded_at: datetime
    status: str

    @classmethod
    def of(cls, fact: FactOut) -> ShownFact:
        return cls(
            id=fact.id,
            subject=fact.subject,
            predicate=fact.predicate,
            object_value=fact.object_value,
            object_entity=fact.object_entity,
            valid_from=fact.valid_from,
            valid_until=fact.valid_until,
            recorded_at=fact.recorded_at,
            status=fact.status,
        )


@dataclass(frozen=True)
class HistoryRow:
    """One fact of the entity's history with its two bars: valid time ([valid_from,
    valid_until)) and recorded time ([recorded_at, closed_at)), and whether it is among the facts
    shown as of the chosen date."""

    fact: TemporalFact
    valid: Bar
    recorded: Bar
    in_view: bool


@dataclass(frozen=True)
class EntityPage:
    project: Project
    entity: Entity
    as_of: datetime
    known_at: datetime
    travelling: bool
    facts: Page
    history: Page
    history_rows: list[HistoryRow]
    scale: TimeScale
    as_of_x: float
    known_at_x: float
    episodes: Page
    neighbourhood: EgoGraph
    drawing: GraphDrawing


def entity_for_browser(*, project_slug: str, entity_slug: str) -> Entity:
    """The entity ``entity_slug`` of project ``project_slug`` (its project loaded), or 404."""
    entity = (
        Entity.objects.select_related("project")
        .filter(project__slug=project_slug, slug=entity_slug)
        .first()
    )
    if entity is None:
        raise NotFoundError(
            f"entity_id: no entity '{entity_slug}' in project '{project_slug}'", field="entity_id"
        )
    return entity


def entity_history_query(entity: Entity) -> QuerySet[TemporalFact]:
    """Every fact with the entity as subject or object, latest valid first."""
    return (
        TemporalFact.objects.filter(Q(subject=entity) | Q(object_entity=entity))
        .select_related("subject", "object_entity")
        .order_by("-valid_from", "-recorded_at", "id")
    )


def entity_episodes_query(
    entity: Entity, *, as_of: datetime | None, known_at: datetime | None
) -> QuerySet[Episode]:
    """Episodes that mention the entity or are the source of its facts, latest first; with
    ``as_of``/``known_at``, only those that had occurred and been recorded by then."""
    mentions = Episode.entities.through.objects.filter(entity_id=entity.pk).values("episode_id")
    sources = TemporalFact.objects.filter(subject=entity, source_episode__isnull=False).values(
        "source_episode_id"
    )
    episodes = Episode.objects.filter(Q(id__in=mentions) | Q(id__in=sources))
    episodes = episodes.filter(episode_visible(as_of, known_at))
    return episodes.order_by("-occurred_at", "id")


def entity_page(*, entity: Entity, params: EntityBrowseInput) -> EntityPage:
    """Everything the entity's page shows, as of ``params.as_of`` (valid time) and
    ``params.known_at`` (transaction time), both now when not given."""
    now = utcnow()
    as_of, known_at = params.as_of or now, params.known_at or now
    travelling = params.as_of is not None or params.known_at is not None
    visible = facts_visible_at(
        project=entity.project, as_of=as_of, known_at=known_at, entity=entity
    )
    # Its own facts first, then those pointing at it; by predicate.
    visible.sort(key=lambda v: (v.fact.subject != entity.slug, v.fact.predicate, v.fact.id))
    facts = Paginator([ShownFact.of(v.fact) for v in visible], FACTS_PER_PAGE).get_page(
        params.facts_page
    )
    history = Paginator(entity_history_query(entity), HISTORY_PER_PAGE).get_page(
        params.history_page
    )
    rows = list(history.object_list)
    scale = time_scale(
        [now, as_of, known_at]
        + [t for f in rows for t in (f.valid_from, f.valid_until, f.recorded_at, f.closed_at)]
    )
    shown = {v.fact.id for v in visible}
    episodes = Paginator(
        entity_episodes_query(entity, as_of=params.as_of, known_at=params.known_at),
        EPISODES_PER_PAGE,
    ).get_page(params.episodes_page)
    ego = entity_neighbourhood(
        entity=entity, max_hops=NEIGHBOURHOOD_HOPS, as_of=as_of, known_at=known_at
    )
    return EntityPage(
        project=entity.project,
        entity=entity,
        as_of=as_of,
        known_at=known_at,
        travelling=travelling,
        facts=facts,
        history=history,
        history_rows=[
            HistoryRow(
                fact=f,
                valid=scale.bar(f.valid_from, f.valid_until),
                recorded=scale.bar(f.recorded_at, f.closed_at),
                in_view=f.id in shown,
            )
            for f in rows
        ],
        scale=scale,
        as_of_x=scale.x(as_of),
        known_at_x=scale.x(known_at),
        episodes=episodes,
        neighbourhood=ego,
        drawing=radial_layout(
            entity.slug,
            [(n.id, n.kind, n.hops) for n in ego.nodes],
            [(e.fact_id, e.source, e.predicate, e.target) for e in ego.edges],
            max_nodes=DRAWN_NODES,
            size=420 if len(ego.nodes) <= 12 else 560,
        ),
    )


def entities_for_browser(*, params: EntityListInput) -> tuple[Page, list[Project]]:
    """A page of entities (by project, then id) matching ``params``, and every project for
    the filter."""
    entities = Entity.objects.select_related("project").order_by("project__slug", "slug")
    if params.project:
        entities = entities.filter(project__slug=params.project)
    if params.q.strip():
        term = params.q.strip()
        entities = entities.filter(Q(slug__icontains=term) | Q(name__icontains=term))
    page = Paginator(entities, ENTITIES_PER_PAGE).get_page(params.page)
    return page, list(Project.objects.order_by("slug"))
