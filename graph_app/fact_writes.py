"""Writes of facts: asserting one (with supersession), retracting it, and retiring it in
favour of a newer one. Each takes its typed input (``graph_app.contracts.facts``), which has
already checked every bound and rule, and runs in one graph write (``graph_app.graph_writes``):
the graph lock is taken first, so what follows reads a settled chain."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from graph_app.contracts.facts import (
    FactOut,
    FactRetractInput,
    FactRetractResult,
    FactUpsertInput,
    FactUpsertResult,
)
from graph_app.contracts.fields import ENTITY_ID_MAX, ENTITY_ID_RE
from graph_app.domain.records import sha256_of
from graph_app.domain.supersession import ChainFact, Placement, place_fact
from graph_app.entity_writes import entity_ensure, entity_exists
from graph_app.graph_writes import GraphWrite, graph_write, record_id_new
from graph_app.models import ChangeAction, Entity, Episode, RecordType, TemporalFact
from graph_app.quarantine_holds import written_hold
from graph_app.record_canonical import (
    FACT_RELATED,
    FACT_VALUE_FIELDS,
    fact_canonical_of,
    instance_row,
)
from graph_app.record_views import fact_view
from graph_app.write_screening import fact_screen
from memoryproject import sql
from memoryproject.contracts import takes
from memoryproject.errors import ConflictError, NotFoundError, validation_error
from memoryproject.models import Project
from memoryproject.screening import screening_out
from memoryproject.timeutil import utcnow


def fact_seal(fact: TemporalFact) -> None:
    """Recomputes the fact's sha256 from its canonical form (related rows must be loaded), by
    the same function integrity verification reads it with."""
    row = instance_row(fact, FACT_VALUE_FIELDS)
    fact.sha256 = sha256_of(fact_canonical_of(row, fact.project.slug))


def fact_close(
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
    fact_seal(fact)
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
    fact_seal(fact)
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
                written_hold(
                    project=project, kind="fact", written=placed.fact, flags=screened.flagged
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
        id=record_id_new("fact"),
        project=project,
        subject=subject or entity_ensure(write, params.subject_id),
        object_value=params.value,
        object_entity=entity_ensure(write, object_slug) if object_slug else None,
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
    return value if entity_exists(project, value) else None


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
        fact_close(closing, write, valid_until=fact.valid_from, now=now, superseded_by=fact.id)
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
            fact_cancel(fact, write, now=now)
            return FactRetractResult(fact=fact_view(fact), retracted=True)
        end = params.at or now
        if end < fact.valid_from:
            raise validation_error("at", "must not be before the fact's valid_from")
        fact_close(fact, write, valid_until=end, now=now, superseded_by=None)
        return FactRetractResult(fact=fact_view(fact), retracted=True)


def fact_cancel(fact: TemporalFact, write: GraphWrite, *, now: datetime) -> None:
    """Closes a scheduled ``fact`` where it would have begun; the fact it would have replaced
    goes on, as a continuation from that instant."""
    start = fact.valid_from
    fact_close(fact, write, valid_until=start, now=now, superseded_by=None)
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
        id=record_id_new("fact"),
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
        fact_close(fact, write, valid_until=end, now=utcnow(), superseded_by=by)
        return fact_view(fact)
