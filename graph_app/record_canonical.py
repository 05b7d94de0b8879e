"""The columns every read of a fact, episode or entity takes, and the canonical form of such a
row: what its SHA-256 and Merkle leaf cover (graph_app.domain.records), built from the row as
the database answers it or from a model instance (``instance_row``), so that a write hashes
what a read will verify through the same function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Model

from graph_app.domain.records import entity_canonical, episode_canonical, fact_canonical, sha256_of
from graph_app.models import Entity
from memoryproject.models import Project

FACT_RELATED = ("project", "subject", "object_entity")


#: A fact's canonical fields (graph_app.domain.records.fact_canonical, less the project) and the
#: column each is read from; they are also the fields of its output.
FACT_CANONICAL_COLUMNS = {
    "id": "id",
    "subject": "subject__slug",
    "predicate": "predicate",
    "object_value": "object_value",
    "object_entity": "object_entity__slug",
    "singular": "singular",
    "confidence": "confidence",
    "valid_from": "valid_from",
    "valid_until": "valid_until",
    "recorded_at": "recorded_at",
    "closed_at": "closed_at",
    "superseded_by": "superseded_by_id",
    "source_episode": "source_episode_id",
}


#: The columns every read of a fact's values uses: its canonical fields and its stored hash.
FACT_VALUE_FIELDS = (*FACT_CANONICAL_COLUMNS.values(), "sha256")


#: An episode's canonical fields (graph_app.domain.records.episode_canonical, less the project).
EPISODE_VALUE_FIELDS = (
    "id",
    "category",
    "title",
    "content",
    "files_touched",
    "entities_mentioned",
    "metadata",
    "occurred_at",
    "recorded_at",
    "external_id",
)


#: An entity's canonical fields (graph_app.domain.records.entity_canonical, less the project;
#: its id is its slug).
ENTITY_VALUE_FIELDS = ("slug", "kind", "name", "aliases", "created_at")


#: A fact's datetime columns.
FACT_TIMES = ("valid_from", "valid_until", "recorded_at", "closed_at")


def instance_row(instance: Model, columns: Iterable[str]) -> dict[str, Any]:
    """``instance`` as the ``values(*columns)`` row the database would answer (related rows
    loaded): lets a write hash what a read will verify through the same function."""
    row: dict[str, Any] = {}
    for column in columns:
        value: Any = instance
        for part in column.split("__"):
            value = getattr(value, part) if value is not None else None
        row[column] = value
    return row


def fact_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: row[column] for name, column in FACT_CANONICAL_COLUMNS.items()}


def fact_canonical_of(row: Mapping[str, Any], project_slug: str) -> dict[str, Any]:
    """The canonical form of a FACT_VALUE_FIELDS row (spelled out: verification builds one
    per fact)."""
    return fact_canonical(
        project=project_slug,
        id=row["id"],
        subject=row["subject__slug"],
        predicate=row["predicate"],
        object_value=row["object_value"],
        object_entity=row["object_entity__slug"],
        singular=row["singular"],
        confidence=row["confidence"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        recorded_at=row["recorded_at"],
        closed_at=row["closed_at"],
        superseded_by=row["superseded_by_id"],
        source_episode=row["source_episode_id"],
    )


def episode_canonical_of(row: Mapping[str, Any], project_slug: str) -> dict[str, Any]:
    """The canonical form of an EPISODE_VALUE_FIELDS row."""
    values = {name: row[name] for name in EPISODE_VALUE_FIELDS}
    # A JSON column nulled behind the application's back still hashes (and so mismatches).
    values["files_touched"] = values["files_touched"] or []
    values["entities_mentioned"] = values["entities_mentioned"] or []
    values["metadata"] = values["metadata"] or {}
    return episode_canonical(project=project_slug, **values)


def entity_canonical_of(row: Mapping[str, Any], project_slug: str) -> dict[str, Any]:
    """The canonical form of an ENTITY_VALUE_FIELDS row."""
    return entity_canonical(
        id=row["slug"],
        project=project_slug,
        kind=row["kind"],
        name=row["name"],
        aliases=row["aliases"] or [],
        created_at=row["created_at"],
    )


def entity_sha256(entity: Entity, project: Project) -> str:
    """The SHA-256 the change log seals ``entity`` with (``project`` is its project)."""
    return sha256_of(entity_canonical_of(instance_row(entity, ENTITY_VALUE_FIELDS), project.slug))
