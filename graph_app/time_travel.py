"""Time travel: the facts valid at ``as_of`` as they were known at transaction time
``known_at``, each in its form as then known, with the snapshot hash over them (the RFC 6962
Merkle root). ``graph_as_of`` and ``facts_as_known`` decide it over the project's timeline kept
in memory (graph_app.graph_caches); ``facts_visible_at`` reads it from the database (optionally
around one entity).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from graph_app.contracts.facts import FactOut
from graph_app.contracts.time_travel import TimeTravelInput, TimeTravelResult
from graph_app.domain.records import fact_as_known_at
from graph_app.graph_caches import snapshot_of
from graph_app.models import Entity, TemporalFact
from graph_app.quarantine_reads import facts_held
from graph_app.raw_rows import rows_read
from graph_app.record_canonical import FACT_TIMES, FACT_VALUE_FIELDS, fact_canonical_of
from graph_app.visibility import fact_visible
from memoryproject.contracts import takes
from memoryproject.domain.canonical import canonical_json
from memoryproject.domain.hashing import sha256_hex
from memoryproject.models import Project
from memoryproject.timeutil import utcnow


@dataclass(frozen=True)
class VisibleFact:
    """A fact as it read at some transaction time: its canonical form then, that form's
    canonical JSON (its Merkle leaf) and its output (hash of the form as then known)."""

    canonical: dict[str, Any]
    leaf: bytes
    fact: FactOut

    @property
    def view(self) -> dict[str, Any]:
        return self.fact.as_json()


def _status(valid_until: object, superseded_by: object) -> str:
    if valid_until is None:
        return "active"
    return "superseded" if superseded_by else "retracted"


def _visible_as_known(row: Mapping[str, Any], project_slug: str, known_at: datetime) -> VisibleFact:
    seen = fact_as_known_at(
        fact_canonical_of(row, project_slug), closed_at=row["closed_at"], known_at=known_at
    )
    leaf = canonical_json(seen)
    fact = FactOut.model_validate(
        {
            **seen,
            "status": _status(seen["valid_until"], seen["superseded_by"]),
            "sha256": sha256_hex(leaf),
        }
    )
    return VisibleFact(canonical=seen, leaf=leaf, fact=fact)


def facts_visible_at(
    *, project: Project, as_of: datetime, known_at: datetime, entity: Entity | None = None
) -> list[VisibleFact]:
    """The facts valid at ``as_of`` as they were known at ``known_at``, sorted by id (with
    ``entity``: only those with it as subject or object).

    Which facts is the visibility rule (``graph_app.visibility.fact_visible``): a fact
    recorded after ``known_at`` is invisible, a closure recorded after ``known_at`` had not
    happened yet (the fact reads as open), and ``valid_from <= as_of < valid_until``. History rows are never rewritten, so a backdated fact
    may overlap an older closed one; for a singular predicate the fact starting latest wins.
    """
    facts = TemporalFact.objects.filter(fact_visible(as_of, known_at), project=project)
    if entity is not None:
        # Its own facts, and those of the subjects pointing at it under the same predicates:
        # among them the rivals that decide which singular fact wins (a superset, read through
        # the subject index; the facts not naming the entity are dropped below).
        pointing = TemporalFact.objects.filter(object_entity=entity).order_by()
        facts = facts.filter(
            Q(subject=entity)
            | Q(
                subject_id__in=pointing.values("subject_id"),
                predicate__in=pointing.values("predicate"),
            )
        )
    rows = facts.values(*FACT_VALUE_FIELDS)
    visible: list[VisibleFact] = []
    winners: dict[tuple[str, str], tuple[datetime, datetime, str]] = {}
    for row in rows:
        visible.append(_visible_as_known(row, project.slug, known_at))
        if row["singular"]:
            key = (row["subject__slug"], row["predicate"])
            rank = (row["valid_from"], row["recorded_at"], row["id"])
            if key not in winners or rank > winners[key]:
                winners[key] = rank
    result = [
        f
        for f in visible
        if not f.fact.singular or winners[(f.fact.subject, f.fact.predicate)][2] == f.fact.id
    ]
    if entity is not None:
        result = [f for f in result if entity.slug in (f.fact.subject, f.fact.object_entity)]
    result.sort(key=lambda f: f.fact.id)
    return result


@takes(TimeTravelInput)
def graph_as_of(*, project: Project, params: TimeTravelInput) -> TimeTravelResult:
    """The facts valid at ``as_of`` as known at transaction time ``known_at`` (default: now),
    with a snapshot hash: the RFC 6962 Merkle root over their canonical forms as then known
    (each fact's ``sha256`` is that of its form as then known). Decided and hashed over the
    project's timeline kept in memory; only the page's facts are read from the database."""
    known_at = params.known_at or utcnow()
    ids, snapshot_hash = snapshot_of(project, params.as_of, known_at)
    end = params.offset + params.limit
    # By primary key alone (the ids are the project's): the page is read through its index.
    page = ids[params.offset : end]
    rows = TemporalFact.objects.filter(id__in=page).order_by("id")
    facts = [
        _visible_as_known(row, project.slug, known_at).fact
        for row in (rows_read(rows, FACT_VALUE_FIELDS, FACT_TIMES) if page else ())
    ]
    return TimeTravelResult(
        project=project.slug,
        as_of=params.as_of,
        known_at=known_at,
        count=len(ids),
        snapshot_hash=snapshot_hash,
        facts=facts_held(project, facts),
        next_offset=end if len(ids) > end else None,
    )
