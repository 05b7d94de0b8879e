"""Writes on the knowledge graph: facts (with supersession), retractions, episodes, entities.

Every write validates all of its input before touching the database, then runs in one
transaction that first takes the project's graph lock (its GraphRevision row), bumps the
revision and stamps every row it creates or changes with it. The lock serialises writers of one
project, so concurrent upserts of a singular predicate form one linear supersession chain; the
partial unique constraint on active singular facts is the database's last word if anything
bypasses it. Answers are JSON-ready dicts, the REST response bodies as they are.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, connection, transaction

from graph_app.domain.hashing import canonical_json
from graph_app.domain.records import episode_canonical, fact_canonical, sha256_of
from graph_app.domain.supersession import ChainFact, place_fact
from graph_app.models import (
    Entity,
    Episode,
    EpisodeCategory,
    EpisodeFile,
    GraphRevision,
    TemporalFact,
)
from graph_app.selectors import entity_as_dict, episode_as_dict, fact_as_dict
from memoryproject.errors import ConflictError, NotFoundError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import parse_aware_datetime, utcnow

ENTITY_ID_MAX = 128
ENTITY_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@+#-]*$")
ENTITY_ID_RULE = (
    "letters, digits and _ . : / @ + # -, starting with a letter or digit, "
    f"at most {ENTITY_ID_MAX} characters"
)
ENTITY_KIND_MAX = 32
PREDICATE_MAX = 128
OBJECT_VALUE_MAX = 2_000
TITLE_MAX = 300
CONTENT_MAX = 50_000
FILES_MAX = 200
FILE_PATH_MAX = 500
ENTITIES_MENTIONED_MAX = 200
EXTERNAL_ID_MAX = 200
METADATA_MAX_CHARS = 10_000
NAME_MAX = 200
ALIASES_MAX = 50
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


# --- validation (pure checks; every error names the field and the rule) -------------------


def _text(value: object, *, field: str, max_len: int, required: bool = True) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise validation_error(field, f"must be a string, got {type(value).__name__}")
    text = value.strip()
    if required and not text:
        raise validation_error(field, "must not be empty")
    if len(text) > max_len:
        raise validation_error(field, f"at most {max_len} characters, got {len(text)}")
    return text


def validate_entity_id(value: object, *, field: str) -> str:
    slug = _text(value, field=field, max_len=ENTITY_ID_MAX)
    if not ENTITY_ID_RE.match(slug):
        raise validation_error(field, f"'{slug[:60]}' is not an entity id; use {ENTITY_ID_RULE}")
    return slug


def _predicate(value: object) -> str:
    text = _text(value, field="predicate", max_len=PREDICATE_MAX)
    if CONTROL_CHARS.search(text) or " " in text:
        raise validation_error("predicate", "must be one word without spaces (e.g. depends_on)")
    return text


def _confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise validation_error("confidence", "must be a number between 0 and 1")
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise validation_error("confidence", "must be a number between 0 and 1")
    return number


def _bool(value: object, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise validation_error(field, "must be true or false")
    return value


def _string_list(
    value: object, *, field: str, max_items: int, item_max: int, entity_ids: bool = False
) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise validation_error(field, "must be a list of strings")
    if len(value) > max_items:
        raise validation_error(field, f"at most {max_items} items, got {len(value)}")
    items: list[str] = []
    for index, item in enumerate(value):
        name = f"{field}[{index}]"
        text = (
            validate_entity_id(item, field=name)
            if entity_ids
            else _text(item, field=name, max_len=item_max)
        )
        if text not in items:
            items.append(text)
    return items


def _metadata(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise validation_error("metadata", "must be a JSON object")
    try:
        size = len(canonical_json(dict(value)))
    except Exception as exc:  # the canonicaliser rejects NaN, non-string keys and the like
        raise validation_error("metadata", f"must be plain JSON ({exc})") from exc
    if size > METADATA_MAX_CHARS:
        raise validation_error("metadata", f"at most {METADATA_MAX_CHARS} bytes of JSON")
    return dict(value)


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


def entity_upsert(
    *,
    project: Project,
    entity_id: str,
    kind: str | None = None,
    name: str | None = None,
    aliases: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Creates the entity or updates its kind, display name and aliases."""
    slug = validate_entity_id(entity_id, field="entity_id")
    new_kind = _text(kind, field="kind", max_len=ENTITY_KIND_MAX) if kind is not None else None
    new_name = _text(name, field="name", max_len=NAME_MAX) if name is not None else None
    new_aliases = (
        _string_list(aliases, field="aliases", max_items=ALIASES_MAX, item_max=ENTITY_ID_MAX)
        if aliases is not None
        else None
    )
    with transaction.atomic():
        revision = graph_revision_bump(project)
        entity = _entity_ensure(project, slug, utcnow())
        if new_kind is not None:
            entity.kind = new_kind
        if new_name is not None:
            entity.name = new_name
        if new_aliases is not None:
            entity.aliases = new_aliases
        entity.save()
        # Indexes built over facts read their subject's name: mark those facts as changed.
        TemporalFact.objects.filter(project=project, subject=entity).update(revision=revision)
    return entity_as_dict(entity)


# --- facts ------------------------------------------------------------------------------------


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def _fact_seal(fact: TemporalFact) -> None:
    """Recomputes the fact's sha256 from its canonical form (related rows must be loaded)."""
    fact.sha256 = sha256_of(
        fact_canonical(
            id=fact.id,
            project=fact.project.slug,
            subject=fact.subject.slug,
            predicate=fact.predicate,
            object_value=fact.object_value,
            object_entity=fact.object_entity.slug if fact.object_entity else None,
            singular=fact.singular,
            confidence=fact.confidence,
            valid_from=fact.valid_from,
            valid_until=fact.valid_until,
            recorded_at=fact.recorded_at,
            closed_at=fact.closed_at,
            superseded_by=fact.superseded_by_id,
            source_episode=fact.source_episode_id,
        )
    )


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


def fact_upsert(
    *,
    project: Project,
    subject_id: str,
    predicate: str,
    object_value: str | None = None,
    singular: bool = True,
    valid_from: datetime | str | None = None,
    source_episode: str | None = None,
    object_entity: str | None = None,
    confidence: float = 1.0,
) -> dict[str, Any]:
    """Asserts ``subject predicate object`` from ``valid_from`` (default: now).

    Entities are created on first mention (the subject, and ``object_entity`` when the object
    is itself an entity: such facts are the graph's edges). For a singular predicate the active
    fact is closed at the new ``valid_from`` and superseded by the new one; re-asserting the
    active fact changes nothing; a fact starting before the recorded ones is kept as history.
    Answers ``{fact, created, outcome: active|history|unchanged, superseded: [...]}``.
    """
    subject_slug = validate_entity_id(subject_id, field="subject_id")
    predicate = _predicate(predicate)
    object_slug = (
        validate_entity_id(object_entity, field="object_entity")
        if object_entity not in (None, "")
        else None
    )
    value = _text(object_value, field="object_value", max_len=OBJECT_VALUE_MAX, required=False)
    if not value:
        if object_slug is None:
            raise validation_error("object_value", "must not be empty")
        value = object_slug
    if CONTROL_CHARS.search(value.replace("\n", "").replace("\t", "")):
        raise validation_error("object_value", "must not contain control characters")
    singular = _bool(singular, field="singular")
    confidence = _confidence(confidence)
    start = parse_aware_datetime(valid_from, field="valid_from")
    episode_id = (
        _text(source_episode, field="source_episode", max_len=40) if source_episode else None
    )

    try:
        with transaction.atomic():
            # The bump locks the project's graph first: what follows reads a settled chain.
            revision = graph_revision_bump(project)
            return _fact_place(
                project=project,
                revision=revision,
                subject_slug=subject_slug,
                predicate=predicate,
                value=value,
                object_slug=object_slug,
                singular=singular,
                confidence=confidence,
                start=start,
                episode_id=episode_id,
            )
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
 AND f.singular = %s AND (f.valid_until IS NULL OR f.valid_from >= %s)
LEFT JOIN {entity} oe ON oe.id = f.object_entity_id
WHERE e.project_id = %s AND e.slug = %s
"""


def _chain_load(
    *, project: Project, subject_slug: str, predicate: str, singular: bool, start: datetime
) -> tuple[Entity | None, list[TemporalFact]]:
    """The subject entity and the facts of its (predicate, singular) chain that can matter to
    a new fact starting at ``start``: the active ones, and those starting at or after it
    (successors and exact repeats). Long histories are not read.

    One statement through the (project, slug) and (project, subject, predicate) indexes: this
    runs on every write, where the ORM's query building would cost more than the query.
    """
    sql = _CHAIN_SQL.format(entity=Entity._meta.db_table, fact=TemporalFact._meta.db_table)
    params: list[Any] = [
        predicate,
        singular,
        connection.ops.adapt_datetimefield_value(start),
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


def _fact_place(
    *,
    project: Project,
    revision: int,
    subject_slug: str,
    predicate: str,
    value: str,
    object_slug: str | None,
    singular: bool,
    confidence: float,
    start: datetime | None,
    episode_id: str | None,
) -> dict[str, Any]:
    if episode_id and not Episode.objects.filter(project=project, id=episode_id).exists():
        raise validation_error("source_episode", f"no episode '{episode_id}' in this project")
    now = utcnow()
    start = start or now
    subject, chain_rows = _chain_load(
        project=project,
        subject_slug=subject_slug,
        predicate=predicate,
        singular=singular,
        start=start,
    )
    chain = [
        ChainFact(
            id=f.id,
            object_value=f.object_value,
            object_entity=f.object_entity.slug if f.object_entity else None,
            valid_from=f.valid_from,
            valid_until=f.valid_until,
            recorded_at=f.recorded_at,
            retracted=f.valid_until is not None and f.superseded_by_id is None,
        )
        for f in chain_rows
    ]
    placement = place_fact(
        chain, object_value=value, object_entity=object_slug, valid_from=start, singular=singular
    )
    by_id = {f.id: f for f in chain_rows}
    if placement.outcome == "unchanged":
        assert placement.existing_id is not None
        existing = by_id[placement.existing_id]
        # Nothing was written: undo the revision bump (and release the lock) with the rest.
        transaction.set_rollback(True)
        return {
            "fact": fact_as_dict(existing),
            "created": False,
            "outcome": "unchanged",
            "superseded": [],
        }

    if subject is None:
        subject = _entity_ensure(project, subject_slug, now)
    obj_entity = _entity_ensure(project, object_slug, now) if object_slug else None
    fact = TemporalFact(
        id=_new_id("fact"),
        project=project,
        subject=subject,
        predicate=predicate,
        object_value=value,
        object_entity=obj_entity,
        singular=singular,
        confidence=confidence,
        valid_from=start,
        recorded_at=now,
        source_episode_id=episode_id,
        revision=revision,
    )
    superseded: list[TemporalFact] = []
    if placement.outcome == "history":
        fact.valid_until = placement.valid_until
        fact.closed_at = now
        fact.superseded_by_id = placement.successor_id
    elif placement.close_id is not None:
        # Closed before the insert: the partial unique index allows one open singular fact.
        closing = by_id[placement.close_id]
        _fact_close(closing, valid_until=start, now=now, revision=revision, superseded_by=fact.id)
        superseded.append(closing)
    _fact_seal(fact)
    fact.save(force_insert=True)
    return {
        "fact": fact_as_dict(fact),
        "created": True,
        "outcome": placement.outcome,
        "superseded": [fact_as_dict(f) for f in superseded],
    }


def fact_retract(
    *, project: Project, fact_id: str, at: datetime | str | None = None
) -> dict[str, Any]:
    """Closes an active fact's validity at ``at`` (default: now) without a replacement."""
    fact_id = _text(fact_id, field="fact_id", max_len=40)
    end = parse_aware_datetime(at, field="at")
    with transaction.atomic():
        revision = graph_revision_bump(project)
        fact = (
            TemporalFact.objects.select_related("project", "subject", "object_entity")
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
        now = utcnow()
        end = end or now
        if end < fact.valid_from:
            raise validation_error("at", "must not be before the fact's valid_from")
        _fact_close(fact, valid_until=end, now=now, revision=revision, superseded_by=None)
        return {"fact": fact_as_dict(fact), "retracted": True}


# --- episodes ---------------------------------------------------------------------------------


def _episode_seal(episode: Episode) -> None:
    episode.sha256 = sha256_of(
        episode_canonical(
            id=episode.id,
            project=episode.project.slug,
            category=episode.category,
            title=episode.title,
            content=episode.content,
            files_touched=episode.files_touched,
            entities_mentioned=episode.entities_mentioned,
            metadata=episode.metadata,
            occurred_at=episode.occurred_at,
            recorded_at=episode.recorded_at,
            external_id=episode.external_id,
        )
    )


def episode_record(
    *,
    project: Project,
    title: str,
    category: str,
    content: str,
    files_touched: Sequence[str] = (),
    entities_mentioned: Sequence[str] = (),
    occurred_at: datetime | str | None = None,
    external_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Stores an immutable episode and links the entities it mentions (created on first
    mention). Recording the same ``external_id`` again with the same content answers the stored
    episode (``created: false``); with different content it is a conflict."""
    title = _text(title, field="title", max_len=TITLE_MAX)
    if not isinstance(category, str) or category not in EpisodeCategory.values:
        raise validation_error(
            "category", f"must be one of {', '.join(EpisodeCategory.values)}, got '{category}'"
        )
    content = _text(content, field="content", max_len=CONTENT_MAX)
    files = _string_list(
        files_touched, field="files_touched", max_items=FILES_MAX, item_max=FILE_PATH_MAX
    )
    mentioned = _string_list(
        entities_mentioned,
        field="entities_mentioned",
        max_items=ENTITIES_MENTIONED_MAX,
        item_max=ENTITY_ID_MAX,
        entity_ids=True,
    )
    when = parse_aware_datetime(occurred_at, field="occurred_at")
    ext = (
        _text(external_id, field="external_id", max_len=EXTERNAL_ID_MAX)
        if external_id not in (None, "")
        else None
    )
    meta = _metadata(metadata)

    with transaction.atomic():
        revision = graph_revision_bump(project)
        if ext is not None:
            existing = (
                Episode.objects.select_related("project").filter(project=project, external_id=ext)
            ).first()
            if existing is not None:
                same = (
                    existing.title == title
                    and existing.category == category
                    and existing.content == content
                    and existing.files_touched == files
                    and existing.entities_mentioned == mentioned
                    and existing.metadata == meta
                    and (when is None or existing.occurred_at == when)
                )
                if not same:
                    raise ConflictError(
                        f"external_id: an episode with external_id '{ext}' already exists "
                        f"({existing.id}) with different content; episodes are immutable",
                        field="external_id",
                    )
                transaction.set_rollback(True)  # nothing written: undo the revision bump
                return {**episode_as_dict(existing), "created": False}
        now = utcnow()
        episode = Episode(
            id=_new_id("ep"),
            project=project,
            category=category,
            title=title,
            content=content,
            files_touched=files,
            entities_mentioned=mentioned,
            metadata=meta,
            occurred_at=when or now,
            recorded_at=now,
            external_id=ext,
            revision=revision,
        )
        _episode_seal(episode)
        episode.save(force_insert=True)
        if files:
            EpisodeFile.objects.bulk_create([EpisodeFile(episode=episode, path=p) for p in files])
        if mentioned:
            links = Episode.entities.through
            links.objects.bulk_create(
                [
                    links(episode_id=episode.id, entity_id=entity.pk)
                    for entity in _entities_ensure(project, mentioned, now)
                ]
            )
        return {**episode_as_dict(episode), "created": True}
