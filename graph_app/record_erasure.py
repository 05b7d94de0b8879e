"""Erasure of a graph record's content (``graph_record_erase``): a fact's object, an episode's
text, an entity's names. The change log keeps the hash the record had in an ``erased`` entry,
so integrity still verifies and lists the erasure."""

from __future__ import annotations

from typing import Literal

from graph_app.episode_writes import episode_seal
from graph_app.fact_writes import fact_cancel, fact_close, fact_seal
from graph_app.graph_writes import GraphWrite, graph_write
from graph_app.models import (
    ChangeAction,
    Entity,
    Episode,
    EpisodeFile,
    GraphChange,
    RecordType,
    TemporalFact,
)
from graph_app.record_canonical import FACT_RELATED, entity_sha256
from memoryproject.errors import NotFoundError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

#: What erased text reads as.
ERASED_TEXT = "[erased]"
RecordKind = Literal["fact", "episode", "entity"]


def _last_sealed(project: Project, record_type: RecordType, record_id: str) -> str | None:
    """The hash the change log last sealed the record with."""
    entries = GraphChange.objects.filter(
        project=project, record_type=record_type.value, record_id=record_id
    )
    return entries.order_by("-seq").values_list("record_sha256", flat=True).first()


def _fact_erase(write: GraphWrite, fact_id: str) -> tuple[str, str]:
    """Retracts the fact if it still holds (cancels it when scheduled), then blanks its object;
    answers its hash before and after."""
    fact = (
        TemporalFact.objects.select_related(*FACT_RELATED)
        .filter(project=write.project, pk=fact_id)
        .first()
    )
    if fact is None:
        raise NotFoundError(f"fact: no fact '{fact_id}' in this project", field="fact")
    now = utcnow()
    if fact.valid_until is not None:
        before = _last_sealed(write.project, RecordType.FACT, fact.id) or fact.sha256
    else:
        # Sealed as closed first (its own entry), so the tombstone is that last hash.
        if fact.valid_from > now:
            fact_cancel(fact, write, now=now)
        else:
            fact_close(fact, write, valid_until=now, now=now, superseded_by=None)
        before = fact.sha256
    fact.object_value, fact.object_entity = ERASED_TEXT, None
    fact.revision = write.revision
    fact_seal(fact)
    fact.save(update_fields=["object_value", "object_entity", "revision", "sha256"])
    return before, fact.sha256


def _episode_erase(write: GraphWrite, episode_id: str) -> tuple[str, str]:
    """Blanks the episode's text and metadata and drops its file rows and entity links."""
    episode = (
        Episode.objects.select_related("project")
        .filter(project=write.project, pk=episode_id)
        .first()
    )
    if episode is None:
        raise NotFoundError(f"episode: no episode '{episode_id}' in this project", field="episode")
    before = _last_sealed(write.project, RecordType.EPISODE, episode.id) or episode.sha256
    EpisodeFile.objects.filter(episode=episode).delete()
    Episode.entities.through.objects.filter(episode_id=episode.id).delete()
    episode.title = episode.content = ERASED_TEXT
    episode.files_touched, episode.entities_mentioned, episode.metadata = [], [], {}
    episode.revision = write.revision
    episode_seal(episode)
    fields = ["title", "content", "files_touched", "entities_mentioned", "metadata"]
    episode.save(update_fields=[*fields, "revision", "sha256"])
    return before, episode.sha256


def _entity_erase(write: GraphWrite, slug: str) -> tuple[str, str]:
    """Blanks the entity's display name and aliases (its id names it in every fact)."""
    project = write.project
    entity = Entity.objects.filter(project=project, slug=slug).first()
    if entity is None:
        raise NotFoundError(f"entity: no entity '{slug}' in this project", field="entity")
    before = _last_sealed(project, RecordType.ENTITY, slug) or entity_sha256(entity, project)
    entity.name, entity.aliases = ERASED_TEXT, []
    entity.save(update_fields=["name", "aliases"])
    TemporalFact.objects.filter(project=project, subject=entity).update(revision=write.revision)
    return before, entity_sha256(entity, project)


_ERASERS = {"fact": _fact_erase, "episode": _episode_erase, "entity": _entity_erase}


def graph_record_erase(
    *, project: Project, record_type: RecordKind, record_id: str, reason: str
) -> list[dict[str, str]]:
    """Removes a fact's, episode's or entity's content (a fact that still holds is retracted
    first) and appends an ``erased`` entry to the change log that keeps the hash the record
    had, with the reason: integrity still verifies and lists the erasure. Answers the erased
    items as receipts name them: ``[{"kind", "id", "sha256"}]`` (the hash before erasure)."""
    if record_type not in _ERASERS:
        raise validation_error("record_type", "must be fact, episode or entity")
    note = reason.strip()
    if not note:
        raise validation_error("reason", "must not be empty: say why the content is erased")
    kind = RecordType(record_type)
    with graph_write(project) as write:
        before, after = _ERASERS[record_type](write, record_id)
        write.append(ChangeAction.ERASED, kind, record_id, after, erased_sha256=before, note=note)
    return [{"kind": record_type, "id": record_id, "sha256": before}]
