"""Writes of episodes: recording one, immutable once stored, with the entities it mentions.
It takes its typed input (``graph_app.contracts.episodes``) and runs in one graph write
(``graph_app.graph_writes``)."""

from __future__ import annotations

from django.db import transaction

from graph_app.contracts.episodes import EpisodeRecordInput, EpisodeRecordResult
from graph_app.domain.records import sha256_of
from graph_app.entity_writes import entity_ids_ensure
from graph_app.graph_writes import GraphWrite, graph_write, record_id_new
from graph_app.models import ChangeAction, Episode, EpisodeFile, RecordType
from graph_app.quarantine_holds import written_hold
from graph_app.record_canonical import EPISODE_VALUE_FIELDS, episode_canonical_of, instance_row
from graph_app.record_views import episode_view
from graph_app.write_screening import episode_screen
from memoryproject import sql
from memoryproject.contracts import takes
from memoryproject.errors import ConflictError
from memoryproject.models import Project
from memoryproject.screening import screening_out
from memoryproject.timeutil import utcnow


def episode_seal(episode: Episode) -> None:
    """Computes the episode's sha256 by the function integrity verification reads it with."""
    row = instance_row(episode, EPISODE_VALUE_FIELDS)
    episode.sha256 = sha256_of(episode_canonical_of(row, episode.project.slug))


@takes(EpisodeRecordInput)
def episode_record(*, project: Project, params: EpisodeRecordInput) -> EpisodeRecordResult:
    """Stores an immutable episode and links the entities it mentions (created on first
    mention). Recording the same ``external_id`` again with the same content answers the stored
    episode (``created: false``); with different content it is a conflict. Secrets in the
    title, content, files_touched and metadata (keys and values) are masked before anything is
    stored (or compared); one in entities_mentioned or external_id refuses the write;
    ``screening`` says what was masked and flagged."""
    params, screened = episode_screen(params)
    report = screening_out(screened)
    with graph_write(project) as write:
        existing = _episode_recorded(project, params)
        if existing is not None:
            transaction.set_rollback(True)  # nothing written: undo the revision bump
            return episode_view(existing, EpisodeRecordResult, created=False, screening=report)
        episode = _episode_insert(write, params)
        answer = episode_view(episode, EpisodeRecordResult, created=True, screening=report)
        written_hold(project=project, kind="episode", written=answer, flags=screened.flagged)
        return answer


#: What an episode recorded again under its external_id must repeat (with its metadata and,
#: when given, its occurred_at).
_EPISODE_CONTENT = ("title", "category", "content", "files_touched", "entities_mentioned")


def _episode_recorded(project: Project, params: EpisodeRecordInput) -> Episode | None:
    """The episode already recorded under the input's external_id, when its content is the
    same; a conflict when it differs (episodes are immutable)."""
    if params.external_id is None:
        return None
    existing = (
        Episode.objects.select_related("project")
        .filter(project=project, external_id=params.external_id)
        .first()
    )
    if existing is None:
        return None
    same = (
        all(getattr(existing, name) == getattr(params, name) for name in _EPISODE_CONTENT)
        and existing.metadata == (params.metadata or {})
        and (params.occurred_at is None or existing.occurred_at == params.occurred_at)
    )
    if not same:
        raise ConflictError(
            f"external_id: an episode with external_id '{params.external_id}' already exists "
            f"({existing.id}) with different content; episodes are immutable",
            field="external_id",
        )
    return existing


def _episode_insert(write: GraphWrite, params: EpisodeRecordInput) -> Episode:
    project, now = write.project, utcnow()
    episode = Episode(
        id=record_id_new("ep"),
        project=project,
        metadata=params.metadata or {},
        occurred_at=params.occurred_at or now,
        recorded_at=now,
        revision=write.revision,
        **params.model_dump(include={*_EPISODE_CONTENT, "external_id"}),
    )
    episode_seal(episode)
    sql.insert(episode)
    if params.files_touched:
        files = [(episode.id, path) for path in params.files_touched]
        sql.insert_rows(EpisodeFile, ("episode", "path"), files)
    if params.entities_mentioned:
        ids = entity_ids_ensure(write, params.entities_mentioned)
        links = [(episode.id, entity_id) for entity_id in ids]
        sql.insert_rows(Episode.entities.through, ("episode", "entity"), links)
    # Its file rows and entity links index files_touched and entities_mentioned, which the
    # hash covers: verification requires them to be exactly those.
    write.append(ChangeAction.RECORDED, RecordType.EPISODE, episode.id, episode.sha256)
    return episode
