"""Writes of entities: ``entity_upsert``, and the entities a fact or an episode creates on
first mention. Each runs inside a graph write (``graph_app.graph_writes``)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from graph_app.contracts.entities import EntityUpsertInput, EntityUpsertResult
from graph_app.entity_reads import entity_by_slug, entity_by_slug_sql
from graph_app.graph_writes import GraphWrite, graph_write
from graph_app.models import ChangeAction, Entity, RecordType, TemporalFact
from graph_app.record_canonical import entity_sha256
from graph_app.record_views import entity_view
from graph_app.write_screening import entity_screen
from memoryproject import sql
from memoryproject.contracts import takes
from memoryproject.models import Project
from memoryproject.screening import screening_out


def entity_exists(project: Project, slug: str) -> bool:
    """Whether the project has an entity of id ``slug``."""
    return bool(sql.fetch(entity_by_slug_sql("1"), [project.pk, slug]))


def entity_ensure(write: GraphWrite, slug: str) -> Entity:
    """The project's entity ``slug``, created (and sealed in the change log) when missing."""
    project = write.project
    entity = entity_by_slug(project, slug)
    if entity is None:
        entity = Entity(project=project, slug=slug, name=slug, created_at=write.now)
        sql.insert(entity)
        _entity_sealed(write, entity, ChangeAction.CREATED)
    return entity


def _entity_sealed(write: GraphWrite, entity: Entity, action: ChangeAction) -> None:
    write.append(action, RecordType.ENTITY, entity.slug, entity_sha256(entity, write.project))


def entity_ids_ensure(write: GraphWrite, slugs: Sequence[str]) -> list[int]:
    """The row ids of the entities named, creating the missing ones, in two queries whatever
    their number."""
    project = write.project
    found = dict(sql.fetch(_entity_ids_sql(len(slugs)), [project.pk, *slugs]))
    missing = [
        Entity(project=project, slug=slug, name=slug, created_at=write.now)
        for slug in slugs
        if slug not in found
    ]
    if missing:
        Entity.objects.bulk_create(missing)
        for entity in missing:
            _entity_sealed(write, entity, ChangeAction.CREATED)
        created = Entity.objects.filter(project=project, slug__in=[e.slug for e in missing])
        found.update(created.values_list("slug", "pk"))
    return [found[slug] for slug in slugs]


@lru_cache(maxsize=64)
def _entity_ids_sql(count: int) -> str:
    """(slug, row id) of ``count`` entities of a project (its id, then their slugs)."""
    return (
        f"SELECT {sql.columns(Entity, ('slug', 'pk'))} FROM {sql.table(Entity)} "
        f"WHERE {sql.column(Entity, 'project')} = %s "
        f"AND {sql.column(Entity, 'slug')} IN ({', '.join(['%s'] * count)})"
    )


@takes(EntityUpsertInput)
def entity_upsert(*, project: Project, params: EntityUpsertInput) -> EntityUpsertResult:
    """Creates the entity or updates its kind, display name and aliases (those given). Secrets
    in them are masked before anything is stored (one in its id refuses the write);
    ``screening`` says what was masked and flagged."""
    params, screened = entity_screen(params)
    with graph_write(project) as write:
        entity = Entity.objects.filter(project=project, slug=params.entity_id).first()
        created = entity is None
        if entity is None:
            entity = Entity(project=project, slug=params.entity_id, created_at=write.now)
            entity.name = entity.slug
        before = None if created else entity_sha256(entity, project)
        if params.kind is not None:
            entity.kind = params.kind
        if params.name is not None:
            entity.name = params.name
        if params.aliases is not None:
            entity.aliases = params.aliases
        entity.save()
        if created:
            _entity_sealed(write, entity, ChangeAction.CREATED)
        elif entity_sha256(entity, project) != before:
            _entity_sealed(write, entity, ChangeAction.CHANGED)
        # Indexes built over facts read their subject's name: mark those facts as changed.
        TemporalFact.objects.filter(project=project, subject=entity).update(revision=write.revision)
    view = entity_view(entity).model_dump()
    return EntityUpsertResult(**view, screening=screening_out(screened))
