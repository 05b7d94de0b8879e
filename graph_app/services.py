"""Writes on the knowledge graph: facts (with supersession), retractions, episodes, entities.

Each write takes its typed input (``graph_app.contracts.graph``), which has already checked every
bound and rule, then runs in one transaction that first takes the project's graph lock (its
GraphRevision row), bumps the revision and stamps every row it creates or changes with it. The
lock serialises writers of one project, so concurrent upserts of a singular predicate form one
linear supersession chain; the partial unique constraint on active singular facts is the
database's last word if anything bypasses it. Answers are the typed outputs of the contracts.

Every write also appends, before it commits, one entry per record it created or changed to the
project's hash-chained change log (``graph_app.models.changes``): ``graph_write`` opens the
transaction, takes the lock and seals the entries. Erasure (``graph_record_erase``) removes a
record's content and appends an entry that keeps the hash it had.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache, partial
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from graph_app.contracts.entities import EntityUpsertResult
from graph_app.contracts.graph import (
    ENTITY_ID_MAX,
    ENTITY_ID_RE,
    EntityUpsertInput,
    EpisodeRecordInput,
    EpisodeRecordResult,
    FactOut,
    FactRetractInput,
    FactRetractResult,
    FactUpsertInput,
    FactUpsertResult,
)
from graph_app.domain.records import change_hash, sha256_of
from graph_app.domain.supersession import ChainFact, Placement, place_fact
from graph_app.models import (
    ChangeAction,
    Entity,
    Episode,
    EpisodeFile,
    GraphChange,
    GraphRevision,
    RecordType,
    TemporalFact,
)
from graph_app.selectors import (
    CHANGE_FIELDS,
    EPISODE_VALUE_FIELDS,
    FACT_RELATED,
    FACT_VALUE_FIELDS,
    entity_by_slug,
    entity_by_slug_sql,
    entity_sha256,
    entity_view,
    episode_canonical_of,
    episode_view,
    fact_canonical_of,
    fact_view,
    instance_row,
)
from graph_app.write_screening import entity_screen, episode_screen, fact_screen
from memoryproject import sql
from memoryproject.contracts import takes
from memoryproject.errors import ConflictError, NotFoundError, validation_error
from memoryproject.models import Project
from memoryproject.quarantine import record_hold
from memoryproject.screening import screening_out
from memoryproject.timeutil import utcnow
from memoryproject.witness import graph_stream, witness_head_advance
from memoryproject.writes import write_transaction

# --- the graph lock and revision --------------------------------------------------------------


def _graph_lock(project: Project) -> tuple[int, int, str]:
    """Bumps the project's graph revision and answers it with the change log's head (size,
    last hash). The UPDATE takes the row lock of the project's GraphRevision (created on first
    use) and holds it until the transaction ends: this is the lock that serialises the
    project's graph writers, so call it first, before reading what the write depends on."""
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
        cursor.execute(
            f"SELECT revision, changes, head_hash FROM {table} WHERE project_id = %s",
            [project.pk],
        )
        row = cursor.fetchone()
    return int(row[0]), int(row[1]), str(row[2])


def graph_revision_bump(project: Project) -> int:
    """Bumps the project's graph revision and answers it; call inside the write's transaction
    and stamp every row the write creates or changes with the answer. Writes that change rows
    go through ``graph_write``, which also keeps the change log."""
    return _graph_lock(project)[0]


#: The change log's columns a write inserts, in order.
_CHANGE_COLUMNS = ("project_id", *CHANGE_FIELDS)


@dataclass
class GraphWrite:
    """A graph write in progress: its revision, and the change log entries it appends (each
    chained to the one before), inserted together when the write seals."""

    project: Project
    revision: int
    size: int
    head: str
    now: datetime
    pending: list[tuple[Any, ...]] = field(default_factory=list)

    def append(
        self,
        action: ChangeAction,
        record_type: RecordType,
        record_id: str,
        record_sha256: str,
        *,
        erased_sha256: str = "",
        note: str = "",
    ) -> str:
        """Chains an entry (``record_sha256`` is the record's hash after this change);
        answers its hash."""
        entry = (
            self.size + 1,
            self.revision,
            action.value,
            record_type.value,
            record_id,
            record_sha256,
            erased_sha256,
            note,
            self.now,
            self.head,
        )
        digest = change_hash(self.project.slug, *entry)
        self.pending.append((self.project.pk, *entry, digest))
        self.size, self.head = self.size + 1, digest
        return digest

    def seal(self) -> None:
        """Inserts the pending entries and moves the head (two statements whatever their
        number); nothing when none were appended. Entries are plain rows: the log's model
        only ever reads them."""
        if not self.pending:
            return
        at = connection.ops.adapt_datetimefield_value(self.now)
        rows = [(*entry[:9], at, *entry[10:]) for entry in self.pending]
        self.pending = []
        changes, head = GraphChange._meta.db_table, GraphRevision._meta.db_table
        columns = ", ".join(_CHANGE_COLUMNS)
        row = "(" + ", ".join(["%s"] * len(_CHANGE_COLUMNS)) + ")"
        with connection.cursor() as cursor:
            for start in range(0, len(rows), _INSERT_BATCH):
                batch = rows[start : start + _INSERT_BATCH]
                values = ", ".join([row] * len(batch))
                params = [value for entry in batch for value in entry]
                cursor.execute(f"INSERT INTO {changes} ({columns}) VALUES {values}", params)
            cursor.execute(
                f"UPDATE {head} SET changes = %s, head_hash = %s WHERE project_id = %s",
                [self.size, self.head, self.project.pk],
            )
        # Witnessed once committed (a rolled-back head must never be witnessed).
        transaction.on_commit(
            partial(
                witness_head_advance,
                graph_stream(self.project.pk),
                self.size,
                self.head,
                project=self.project.slug,
            )
        )


#: Entries per INSERT statement (12 parameters each: within SQLite's and PostgreSQL's limits).
_INSERT_BATCH = 500


@contextmanager
def graph_write(project: Project) -> Iterator[GraphWrite]:
    """The transaction of one graph write: takes the project's graph lock (bumping its
    revision) and, when the body ends without an error, seals the change log entries it
    appended, before the commit."""
    with write_transaction():
        revision, size, head = _graph_lock(project)
        write = GraphWrite(project=project, revision=revision, size=size, head=head, now=utcnow())
        yield write
        write.seal()


# --- entities ---------------------------------------------------------------------------------


def _entity_exists(project: Project, slug: str) -> bool:
    return bool(sql.fetch(entity_by_slug_sql("1"), [project.pk, slug]))


def _entity_ensure(write: GraphWrite, slug: str) -> Entity:
    project = write.project
    entity = entity_by_slug(project, slug)
    if entity is None:
        entity = Entity(project=project, slug=slug, name=slug, created_at=write.now)
        sql.insert(entity)
        _entity_sealed(write, entity, ChangeAction.CREATED)
    return entity


def _entity_sealed(write: GraphWrite, entity: Entity, action: ChangeAction) -> None:
    write.append(action, RecordType.ENTITY, entity.slug, entity_sha256(entity, write.project))


def _entity_ids_ensure(write: GraphWrite, slugs: Sequence[str]) -> list[int]:
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
    write: GraphWrite,
    *,
    valid_until: datetime,
    now: datetime,
    superseded_by: str | None,
) -> None:
    """Closes ``fact`` in one UPDATE. ``superseded_by`` may name a fact inserted later in the
    same transaction: foreign keys are checked at commit on both databases."""
    fact.valid_until = valid_until
    fact.closed_at = now
    fact.superseded_by_id = superseded_by
    fact.revision = write.revision
    _fact_seal(fact)
    sql.execute(
        _fact_close_sql(),
        [*sql.values_of(fact, _CLOSED_FIELDS), fact.pk],
    )
    write.append(ChangeAction.CLOSED, RecordType.FACT, fact.id, fact.sha256)


#: What closing a fact changes (in one UPDATE built once).
_CLOSED_FIELDS = ("valid_until", "closed_at", "superseded_by", "revision", "sha256")


@cache
def _fact_close_sql() -> str:
    assignments = ", ".join(f"{sql.column(TemporalFact, f)} = %s" for f in _CLOSED_FIELDS)
    return (
        f"UPDATE {sql.table(TemporalFact)} SET {assignments} "
        f"WHERE {sql.column(TemporalFact, 'pk')} = %s"
    )


def _fact_insert_sealed(fact: TemporalFact, write: GraphWrite) -> None:
    _fact_seal(fact)
    sql.insert(fact)
    write.append(ChangeAction.ASSERTED, RecordType.FACT, fact.id, fact.sha256)


@takes(FactUpsertInput)
def fact_upsert(*, project: Project, params: FactUpsertInput) -> FactUpsertResult:
    """Asserts ``subject predicate object`` from ``valid_from`` (default: now).

    Entities are created on first mention (the subject, and ``object_entity`` when the object
    is itself an entity: such facts are the graph's edges). For a singular predicate the active
    fact is closed at the new ``valid_from`` and superseded by the new one; re-asserting the
    active fact changes nothing; a fact starting before the recorded ones is kept as history.
    Answers the fact, whether it was created, its outcome (active, history or unchanged) and
    the facts it superseded. Secrets in ``object_value`` are masked before anything is stored
    (one in subject_id, predicate or object_entity refuses the write); ``screening`` says what
    was masked and flagged.
    """
    params, screened = fact_screen(params)
    try:
        # The graph lock is taken first: what follows reads a settled chain.
        with graph_write(project) as write:
            placed = _fact_place(write, params=params)
            if placed.created:
                record_hold(
                    project=project,
                    kind="fact",
                    item_id=placed.fact.id,
                    sha256=placed.fact.sha256,
                    flags=screened.flagged,
                    record=placed.fact.as_json(),
                )
            return FactUpsertResult(
                fact=placed.fact,
                created=placed.created,
                outcome=placed.outcome,
                superseded=placed.superseded,
                screening=screening_out(screened),
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


def _fact_place(write: GraphWrite, *, params: FactUpsertInput) -> FactUpsertResult:
    project = write.project
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
        subject=subject or _entity_ensure(write, params.subject_id),
        object_value=params.value,
        object_entity=_entity_ensure(write, object_slug) if object_slug else None,
        valid_from=start,
        recorded_at=now,
        source_episode_id=episode_id,
        revision=write.revision,
        **params.model_dump(include={"predicate", "singular", "confidence"}),
    )
    superseded = _fact_insert(fact, write, placement, by_id, now=now)
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
    return value if _entity_exists(project, value) else None


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
    fact: TemporalFact,
    write: GraphWrite,
    placement: Placement,
    chain: dict[str, TemporalFact],
    *,
    now: datetime,
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
        _fact_close(closing, write, valid_until=fact.valid_from, now=now, superseded_by=fact.id)
        superseded.append(closing)
    _fact_insert_sealed(fact, write)
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
    with graph_write(project) as write:
        fact = _fact_open(project, params.fact_id)
        now = utcnow()
        if params.at is None and fact.valid_from > now:
            _fact_cancel(fact, write, now=now)
            return FactRetractResult(fact=fact_view(fact), retracted=True)
        end = params.at or now
        if end < fact.valid_from:
            raise validation_error("at", "must not be before the fact's valid_from")
        _fact_close(fact, write, valid_until=end, now=now, superseded_by=None)
        return FactRetractResult(fact=fact_view(fact), retracted=True)


def _fact_cancel(fact: TemporalFact, write: GraphWrite, *, now: datetime) -> None:
    start = fact.valid_from
    _fact_close(fact, write, valid_until=start, now=now, superseded_by=None)
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
        revision=write.revision,
    )
    continuation = TemporalFact(**values)
    continuation.project, continuation.subject = replaced.project, replaced.subject
    continuation.object_entity = replaced.object_entity
    _fact_insert_sealed(continuation, write)


def fact_supersede(*, project: Project, fact_id: str, by: str) -> FactOut:
    """Retires the active fact ``fact_id`` into history, superseded by the project's fact
    ``by`` (a contradiction settled in favour of the newer statement): its validity ends where
    ``by``'s begins, which must be later than its own start."""
    with graph_write(project) as write:
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
        _fact_close(fact, write, valid_until=end, now=utcnow(), superseded_by=by)
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
        record_hold(
            project=project,
            kind="episode",
            item_id=answer.id,
            sha256=answer.sha256,
            flags=screened.flagged,
            record=answer.as_json(),
        )
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
        id=_new_id("ep"),
        project=project,
        metadata=params.metadata or {},
        occurred_at=params.occurred_at or now,
        recorded_at=now,
        revision=write.revision,
        **params.model_dump(include={*_EPISODE_CONTENT, "external_id"}),
    )
    _episode_seal(episode)
    sql.insert(episode)
    if params.files_touched:
        files = [(episode.id, path) for path in params.files_touched]
        sql.insert_rows(EpisodeFile, ("episode", "path"), files)
    if params.entities_mentioned:
        ids = _entity_ids_ensure(write, params.entities_mentioned)
        links = [(episode.id, entity_id) for entity_id in ids]
        sql.insert_rows(Episode.entities.through, ("episode", "entity"), links)
    # Its file rows and entity links index files_touched and entities_mentioned, which the
    # hash covers: verification requires them to be exactly those.
    write.append(ChangeAction.RECORDED, RecordType.EPISODE, episode.id, episode.sha256)
    return episode


# --- erasure ----------------------------------------------------------------------------------

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
            _fact_cancel(fact, write, now=now)
        else:
            _fact_close(fact, write, valid_until=now, now=now, superseded_by=None)
        before = fact.sha256
    fact.object_value, fact.object_entity = ERASED_TEXT, None
    fact.revision = write.revision
    _fact_seal(fact)
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
    _episode_seal(episode)
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
