"""What each graph write screens before it stores anything (``memoryproject.screening``).

Free text is stored masked: an episode's title, content, files_touched and metadata (keys and
values), a fact's object_value, an entity's kind, name and aliases. Identifiers are never
masked, since a masked id would name another record: a secret in an entity id, a fact's
subject_id, predicate or object_entity, or an episode's entities_mentioned or external_id
refuses the write (400, naming the field: ``must not hold a secret (<kind>)``), before anything
is written. Instruction-like passages are flagged in every one of them, by field.

Masking can lengthen a value (``[masked:password_in_url]`` replaces a two-letter password):
masked values are cut to their column's bound, and lists that masking made repeat an item keep
it once.
"""

from __future__ import annotations

from typing import Any

from graph_app.contracts.entities import EntityUpsertInput
from graph_app.contracts.episodes import EpisodeRecordInput
from graph_app.contracts.facts import FactUpsertInput
from graph_app.contracts.fields import (
    ENTITY_ID_MAX,
    ENTITY_KIND_MAX,
    FILE_PATH_MAX,
    NAME_MAX,
    OBJECT_VALUE_MAX,
    TITLE_MAX,
)
from memoryproject.domain.screening import Screening
from memoryproject.screening import write_screened


def _cut(items: list[str], bound: int) -> list[str]:
    return list(dict.fromkeys(item[:bound] for item in items))


def fact_screen(params: FactUpsertInput) -> tuple[FactUpsertInput, Screening]:
    """The fact with its object_value masked, and what screening masked and flagged."""
    screened = write_screened(
        {"object_value": params.object_value or ""},
        {
            "subject_id": params.subject_id,
            "predicate": params.predicate,
            "object_entity": params.object_entity,
        },
    )
    if not screened.masked:
        return params, screened
    value = screened.fields["object_value"][:OBJECT_VALUE_MAX]
    return params.model_copy(update={"object_value": value}), screened


def episode_screen(params: EpisodeRecordInput) -> tuple[EpisodeRecordInput, Screening]:
    """The episode with its secrets masked, and what screening masked and flagged."""
    fields: dict[str, Any] = {"title": params.title, "content": params.content}
    if params.files_touched:
        fields["files_touched"] = params.files_touched
    if params.metadata:
        fields["metadata"] = params.metadata
    ids = {"external_id": params.external_id, "entities_mentioned": params.entities_mentioned}
    screened = write_screened(fields, ids)
    if not screened.masked:
        return params, screened
    update = dict(screened.fields)
    update["title"] = update["title"][:TITLE_MAX]
    if "files_touched" in update:
        update["files_touched"] = _cut(update["files_touched"], FILE_PATH_MAX)
    return params.model_copy(update=update), screened


def entity_screen(params: EntityUpsertInput) -> tuple[EntityUpsertInput, Screening]:
    """The entity's kind, name and aliases (those given) masked, and what screening masked and
    flagged; a secret in its id refuses the write."""
    fields = {
        name: getattr(params, name)
        for name in ("kind", "name", "aliases")
        if getattr(params, name) is not None
    }
    screened = write_screened(fields, {"entity_id": params.entity_id})
    if not screened.masked:
        return params, screened
    update = dict(screened.fields)
    if "kind" in update:
        update["kind"] = update["kind"][:ENTITY_KIND_MAX]
    if "name" in update:
        update["name"] = update["name"][:NAME_MAX]
    if "aliases" in update:
        update["aliases"] = _cut(update["aliases"], ENTITY_ID_MAX)
    return params.model_copy(update=update), screened
