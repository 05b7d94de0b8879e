"""Writes on the knowledge graph: facts (with supersession), retractions, episodes, entities.

Each write takes its typed input (``graph_app.contracts.graph``), which has already checked every
bound and rule, then runs in one transaction that first takes the project's graph lock (its
GraphRevision row), bumps the revision and stamps every row it creates or changes with it. The
lock serialises writers of one project, so concurrent upserts of a singular predicate form one
linear supersession chain; the partial unique constraint on active singular facts is the
database's last word if anything bypasses it. Answers are the typed outputs of the contracts.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from graph_app.contracts.graph import (
    ENTITY_ID_MAX,
    ENTITY_ID_RE,
    EntityOut,
    EntityUpsertInput,
    EpisodeRecordInput,
    EpisodeRecordResult,
    FactOut,
    FactRetractInput,
    FactRetractResult,
    FactUpsertInput,
    FactUpsertResult,
)
from graph_app.domain.records import sha256_of
from graph_app.domain.supersession import ChainFact, Placement, place_fact
from graph_app.models import Entity, Episode, EpisodeFile, GraphRevision, TemporalFact
from graph_app.selectors import (
    EPISODE_VALUE_FIELDS,
    FACT_RELATED,
    FACT_VALUE_FIELDS,
    entity_view,
    episode_canonical_of,
    episode_view,
    fact_canonical_of,
    fact_view,
    instance_row,
)
from memoryproject.contracts import takes
from memoryproject.errors import ConflictError, NotFoundError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

# --- the graph lock and revision --------------------------------------------------------------


def graph_revision_bump(project: Project) -> int:
    """Bumps the project's graph revision and answers it; call inside the write's transaction
    and stamp every row the write creates or changes with the answer.

    The UPDATE takes the row lock of the project's GraphRevision (created on first use) and holds
    it until the transaction ends, so this is also the lock that serialises the project's graph
    writers: call it first, before reading what the write depends on.
    """
    table = GraphRevision._meta.db_table
    bump = f"UPDATE {table} SET revision = revision + 1 WHERE project_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(bump, [project.pk])
        if cursor.rowcount == 0:
            try:
                with transaction.atomic():
                    GraphRevision.objects.create(project=project, revision=0)
            except IntegrityError:
                pass  # another writer created it first; the UPDATE below waits for its lock
            cursor.execute(bump, [project.pk])
        cursor.execute(f"SELECT revision FROM {table} WHERE project_id = %s", [project.pk])
        row = cursor.fetchone()
    return int(row[0])


# --- entities ---------------------------------------------------------------------------------


def _entity_ensure(project: Project, slug: str, now: datetime) -> Entity:
    entity = next(iter(Entity.objects.filter(project=project, slug=slug).order_by()[:1]), None)
    if entity is None:
        entity = Entity.objects.create(project=project, slug=slug, name=slug, created_at=now)
    return entity


def _entities_ensure(project: Project, slugs: Sequence[str], now: datetime) -> list[Entity]:
    """The entities named, creating the missing ones, in two queries whatever their number."""
    found = {e.slug: e for e in Entity.objects.filter(project=project, slug__in=list(slugs))}
    missing = [slug for slug in slugs if slug not in found]
    if missing:
        Entity.objects.bulk_create(
            [Entity(project=project, slug=slug, name=slug, created_at=now) for slug in missing]
        )
        found.update((e.slug, e) for e in Entity.objects.filter(project=project, slug__in=missing))
    return [found[slug] for slug in slugs]


@takes(EntityUpsertInput)
def entity_upsert(*, project: Project, params: EntityUpsertInput) -> EntityOut:
    """Creates the entity or updates its kind, display name and aliases (those given)."""
    with transaction.atomic():
        revision = graph_revision_bump(project)
        entity = _entity_ensure(project, params.entity_id, utcnow())
        if params.kind is not None:
            entity.kind = params.kind
        if params.name is not None:
            entity.name = params.name
        if params.aliases is not None:
            entity.aliases = params.aliases
        entity.save()
        # Indexes built over facts read their subject's name: mark those facts as changed.
        TemporalFact.objects.filter(project=project, subject=entity).update(revision=revision)
    return entity_view(entity)


# --- facts ------------------------------------------------------------------------------------


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def _fact_seal(fact: TemporalFact) -> None:
    """Recomputes the fact's sha256 from its canonical form (related rows must be loaded), by
    the same function integrity verification reads it with."""
    row = instance_row(fact, FACT_VALUE_FIELDS)
    fact.sha256 = sha256_of(fact_canonical_of(row, fact.project.slug))


def _fact_close(
    fact: TemporalFact,
    *,
    valid_until: datetime,
    now: datetime,
    revision: int,
    superseded_by: str | None,
) -> None:
    """Closes ``fact`` in one UPDATE. ``superseded_by`` may name a fact inserted later in the
    same transaction: foreign keys are checked at commit on both databases."""
    fact.valid_until = valid_until
    fact.closed_at = now
    fact.superseded_by_id = superseded_by
    fact.revision = revision
    _fact_seal(fact)
    TemporalFact.objects.filter(pk=fact.pk).update(
        valid_until=fact.valid_until,
        closed_at=fact.closed_at,
        superseded_by_id=fact.superseded_by_id,
        revision=fact.revision,
        sha256=fact.sha256,
    )


@takes(FactUpsertInput)
def fact_upsert(*, project: Project, params: FactUpsertInput) -> FactUpsertResult:
    """Asserts ``subject predicate object`` from ``valid_from`` (default: now).

    Entities are created on first mention (the subject, and ``object_entity`` when the object
    is itself an entity: such facts are the graph's edges). For a singular predicate the active
    fact is closed at the new ``valid_from`` and superseded by the new one; re-asserting the
    active fact changes nothing; a fact starting before the recorded ones is kept as history.
    Answers the fact, whether it was created, its outcome (active, history or unchanged) and
    the facts it superseded.
    """
    try:
        with transaction.atomic():
            # The bump locks the project's graph first: what follows reads a settled chain.
            revision = graph_revision_bump(project)
            return _fact_place(project=project, revision=revision, params=params)
    except IntegrityError as exc:
        # Only reachable when a writer bypasses the graph lock; the partial unique index held.
        raise ConflictError(
            "predicate: another active value was written for this subject and predicate "
            "at the same moment; retry",
            field="predicate",
        ) from exc


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands raw queries naive UTC datetimes; PostgreSQL hands aware ones.
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _aware_required(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


_CHAIN_SQL = """
SELECT e.id, f.id, f.object_value, f.object_entity_id, oe.slug, f.confidence, f.valid_from,
       f.valid_until, f.recorded_at, f.closed_at, f.superseded_by_id, f.source_episode_id,
       f.sha256, f.revision
FROM {entity} e
LEFT JOIN {fact} f
  ON f.subject_id = e.id AND f.project_id = e.project_id AND f.predicate = %s
 AND f.singular = %s
 AND (f.valid_until IS NULL OR f.valid_from >= %s OR f.valid_until > %s)
LEFT JOIN {entity} oe ON oe.id = f.object_entity_id
WHERE e.project_id = %s AND e.slug = %s
"""


def _chain_load(
    *, project: Project, subject_slug: str, predicate: str, singular: bool, start: datetime
) -> tuple[Entity | None, list[TemporalFact]]:
    """The subject entity and the facts of its (predicate, singular) chain that can matter to
    a new fact starting at ``start``: the active ones, those starting at or after it
    (successors and exact repeats) and those still valid at it. Long histories are not read.

    One statement through the (project, slug) and (project, subject, predicate) indexes: this
    runs on every write, where the ORM's query building would cost more than the query.
    """
    sql = _CHAIN_SQL.format(entity=Entity._meta.db_table, fact=TemporalFact._meta.db_table)
    at = connection.ops.adapt_datetimefield_value(start)
    params: list[Any] = [
        predicate,
        singular,
        at,
        at,
        project.pk,
        subject_slug,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return None, []
    subject = Entity(id=rows[0][0], project=project, slug=subject_slug)
    facts: list[TemporalFact] = []
    for row in rows:
        (_, fact_id, value, obj_pk, obj_slug, confidence, valid_from, valid_until) = row[:8]
        (recorded_at, closed_at, superseded_by, source_episode, sha256, revision) = row[8:]
        if fact_id is None:
            continue
        facts.append(
            TemporalFact(
                id=fact_id,
                project=project,
                subject=subject,
                predicate=predicate,
                object_value=value,
                object_entity=(
                    Entity(id=obj_pk, project=project, slug=obj_slug) if obj_pk else None
                ),
                singular=singular,
                confidence=confidence,
                valid_from=_aware_required(valid_from),
                valid_until=_aware(valid_until),
                recorded_at=_aware_required(recorded_at),
                closed_at=_aware(closed_at),
                superseded_by_id=superseded_by,
                source_episode_id=source_episode,
                sha256=sha256,
                revision=revision,
            )
        )
    return subject, facts


def _fact_place(*, project: Project, revision: int, params: FactUpsertInput) -> FactUpsertResult:
    episode_id = params.source_episode
    if episode_id and not Episode.objects.filter(project=project, id=episode_id).exists():
        raise validation_error("source_episode", f"no episode '{episode_id}' in this project")
    now = utcnow()
    start = params.valid_from or now
    object_slug = _object_slug(project, params)
    subject, chain_rows = _chain_load(
        project=project,
        subject_slug=params.subject_id,
        predicate=params.predicate,
        singular=params.singular,
        start=start,
    )
    placement = place_fact(
        [_chain_fact(f) for f in chain_rows],
        object_value=params.value,
        object_entity=object_slug,
        valid_from=start,
        singular=params.singular,
        now=now,
    )
    by_id = {f.id: f for f in chain_rows}
    if placement.outcome == "same_start":
        raise ConflictError(
            f"valid_from: the active fact {placement.existing_id} starts at the same instant "
            "with another value, which would leave it valid for no time at all; retract it "
            "first, or give a later valid_from",
            field="valid_from",
        )
    if placement.outcome == "unchanged":
        assert placement.existing_id is not None
        # Nothing was written: undo the revision bump (and release the lock) with the rest.
        transaction.set_rollback(True)
        existing = fact_view(by_id[placement.existing_id])
        return FactUpsertResult(fact=existing, created=False, outcome="unchanged", superseded=[])
    fact = TemporalFact(
        id=_new_id("fact"),
        project=project,
        subject=subject or _entity_ensure(project, params.subject_id, now),
        object_value=params.value,
        object_entity=_entity_ensure(project, object_slug, now) if object_slug else None,
        valid_from=start,
        recorded_at=now,
        source_episode_id=episode_id,
        revision=revision,
        **params.model_dump(include={"predicate", "singular", "confidence"}),
    )
    superseded = _fact_insert(fact, placement, by_id, now=now)
    return FactUpsertResult(
        fact=fact_view(fact),
        created=True,
        outcome=placement.outcome,
        superseded=[fact_view(f) for f in superseded],
    )


def _object_slug(project: Project, params: FactUpsertInput) -> str | None:
    """The id of the fact's object as an entity, which makes the fact a graph edge:
    ``object_entity`` when given; else an ``object_value`` that is the id of an entity of the
    project, or any valid entity id given as the object of a relational predicate (depends_on,
    calls, ...: the MEMORY_RELATIONAL_PREDICATES setting), created on first mention."""
    if params.object_entity:
        return params.object_entity
    value = params.object_value or ""
    if not value or len(value) > ENTITY_ID_MAX or not ENTITY_ID_RE.match(value):
        return None
    if params.predicate in settings.MEMORY_RELATIONAL_PREDICATES:
        return value
    return value if Entity.objects.filter(project=project, slug=value).exists() else None


def _chain_fact(fact: TemporalFact) -> ChainFact:
    return ChainFact(
        id=fact.id,
        object_value=fact.object_value,
        object_entity=fact.object_entity.slug if fact.object_entity else None,
        valid_from=fact.valid_from,
        valid_until=fact.valid_until,
        recorded_at=fact.recorded_at,
        retracted=fact.valid_until is not None and fact.superseded_by_id is None,
    )


def _fact_insert(
    fact: TemporalFact, placement: Placement, chain: dict[str, TemporalFact], *, now: datetime
) -> list[TemporalFact]:
    """Inserts the new ``fact`` where ``placement`` puts it; answers the facts it closed."""
    superseded: list[TemporalFact] = []
    if placement.outcome == "history":
        fact.valid_until = placement.valid_until
        fact.closed_at = now
        fact.superseded_by_id = placement.successor_id
    if placement.close_id is not None:
        # Closed before the insert: the partial unique index allows one open singular fact.
        closing = chain[placement.close_id]
        _fact_close(
            closing,
            valid_until=fact.valid_from,
            now=now,
            revision=fact.revision,
            superseded_by=fact.id,
        )
        superseded.append(closing)
    _fact_seal(fact)
    fact.save(force_insert=True)
    return superseded


def _fact_open(project: Project, fact_id: str) -> TemporalFact:
    """The project's fact ``fact_id`` while it is still active; 404 or 409 otherwise. Call
    after the graph lock is taken."""
    fact = (
        TemporalFact.objects.select_related(*FACT_RELATED)
        .filter(project=project, pk=fact_id)
        .first()
    )
    if fact is None:
        raise NotFoundError(f"fact_id: no fact '{fact_id}' in this project", field="fact_id")
    if fact.valid_until is not None:
        raise ConflictError(
            f"fact_id: fact '{fact_id}' is already {fact.status} "
            f"(valid until {fact.valid_until.isoformat()})",
            field="fact_id",
        )
    return fact


@takes(FactRetractInput)
def fact_retract(*, project: Project, params: FactRetractInput) -> FactRetractResult:
    """Closes an active fact's validity at ``at`` (default: now) without a replacement.

    A scheduled fact (starting in the future) retracted without ``at`` is cancelled: it is
    closed where it would have begun, so it never holds, and the fact it would have replaced
    goes on (as a continuation from that instant: history rows are never rewritten)."""
    with transaction.atomic():
        revision = graph_revision_bump(project)
        fact = _fact_open(project, params.fact_id)
        now = utcnow()
        if params.at is None and fact.valid_from > now:
            _fact_cancel(fact, now=now, revision=revision)
            return FactRetractResult(fact=fact_view(fact), retracted=True)
        end = params.at or now
        if end < fact.valid_from:
            raise validation_error("at", "must not be before the fact's valid_from")
        _fact_close(fact, valid_until=end, now=now, revision=revision, superseded_by=None)
        return FactRetractResult(fact=fact_view(fact), retracted=True)


def _fact_cancel(fact: TemporalFact, *, now: datetime, revision: int) -> None:
    start = fact.valid_from
    _fact_close(fact, valid_until=start, now=now, revision=revision, superseded_by=None)
    replaced = (
        TemporalFact.objects.select_related(*FACT_RELATED)
        .filter(superseded_by=fact, valid_until=start)
        .first()
    )
    if replaced is None:
        return
    # The same statement, open again from where the cancelled fact would have begun.
    values = {f.attname: getattr(replaced, f.attname) for f in TemporalFact._meta.concrete_fields}
    values.update(
        id=_new_id("fact"),
        valid_from=start,
        valid_until=None,
        recorded_at=now,
        closed_at=None,
        superseded_by_id=None,
        revision=revision,
    )
    continuation = TemporalFact(**values)
    continuation.project, continuation.subject = replaced.project, replaced.subject
    continuation.object_entity = replaced.object_entity
    _fact_seal(continuation)
    continuation.save(force_insert=True)


def fact_supersede(*, project: Project, fact_id: str, by: str) -> FactOut:
    """Retires the active fact ``fact_id`` into history, superseded by the project's fact
    ``by`` (a contradiction settled in favour of the newer statement): its validity ends where
    ``by``'s begins, which must be later than its own start."""
    with transaction.atomic():
        revision = graph_revision_bump(project)
        successor = TemporalFact.objects.filter(project=project, pk=by).first()
        if successor is None:
            raise NotFoundError(f"by: no fact '{by}' in this project", field="by")
        fact = _fact_open(project, fact_id)
        end = successor.valid_from
        if end <= fact.valid_from:
            raise ConflictError(
                f"by: fact '{by}' does not start after '{fact_id}'; it cannot supersede it",
                field="by",
            )
        _fact_close(fact, valid_until=end, now=utcnow(), revision=revision, superseded_by=by)
        return fact_view(fact)


# --- episodes ---------------------------------------------------------------------------------


def _episode_seal(episode: Episode) -> None:
    """Computes the episode's sha256 by the function integrity verification reads it with."""
    row = instance_row(episode, EPISODE_VALUE_FIELDS)
    episode.sha256 = sha256_of(episode_canonical_of(row, episode.project.slug))


@takes(EpisodeRecordInput)
def episode_record(*, project: Project, params: EpisodeRecordInput) -> EpisodeRecordResult:
    """Stores an immutable episode and links the entities it mentions (created on first
    mention). Recording the same ``external_id`` again with the same content answers the stored
    episode (``created: false``); with different content it is a conflict."""
    with transaction.atomic():
        revision = graph_revision_bump(project)
        existing = _episode_recorded(project, params)
        if existing is not None:
            transaction.set_rollback(True)  # nothing written: undo the revision bump
            return episode_view(existing, EpisodeRecordResult, created=False)
        episode = _episode_insert(project, params, revision)
        return episode_view(episode, EpisodeRecordResult, created=True)


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


def _episode_insert(project: Project, params: EpisodeRecordInput, revision: int) -> Episode:
    now = utcnow()
    episode = Episode(
        id=_new_id("ep"),
        project=project,
        metadata=params.metadata or {},
        occurred_at=params.occurred_at or now,
        recorded_at=now,
        revision=revision,
        **params.model_dump(include={*_EPISODE_CONTENT, "external_id"}),
    )
    _episode_seal(episode)
    episode.save(force_insert=True)
    if params.files_touched:
        EpisodeFile.objects.bulk_create(
            [EpisodeFile(episode=episode, path=path) for path in params.files_touched]
        )
    if params.entities_mentioned:
        links = Episode.entities.through
        mentioned = _entities_ensure(project, params.entities_mentioned, now)
        links.objects.bulk_create(
            [links(episode_id=episode.id, entity_id=entity.pk) for entity in mentioned]
        )
    return episode
