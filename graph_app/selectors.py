"""Reads on the knowledge graph: entities with their history and ego graph, time travel,
integrity verification, list queries for the API and change feeds for cached indexes.

Answers are JSON-ready dicts (timestamps ISO-8601 UTC), the REST response bodies as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from graph_app.domain.egograph import Edge, ego_graph
from graph_app.domain.hashing import canonical_json, merkle_root, sha256_hex
from graph_app.domain.records import (
    closure_known,
    episode_canonical,
    fact_as_known_at,
    fact_canonical,
)
from graph_app.models import Entity, Episode, EpisodeCategory, GraphRevision, TemporalFact
from memoryproject.errors import NotFoundError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import iso, parse_aware_datetime, utcnow

MAX_HOPS = 5
EGO_CHUNK = 5_000
FACT_RELATED = ("project", "subject", "object_entity")


# --- row -> dict ------------------------------------------------------------------------------


def fact_as_dict(fact: TemporalFact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "project": fact.project.slug,
        "subject": fact.subject.slug,
        "predicate": fact.predicate,
        "object_value": fact.object_value,
        "object_entity": fact.object_entity.slug if fact.object_entity else None,
        "singular": fact.singular,
        "confidence": fact.confidence,
        "valid_from": iso(fact.valid_from),
        "valid_until": iso(fact.valid_until),
        "recorded_at": iso(fact.recorded_at),
        "closed_at": iso(fact.closed_at),
        "superseded_by": fact.superseded_by_id,
        "source_episode": fact.source_episode_id,
        "status": fact.status,
        "sha256": fact.sha256,
        "revision": fact.revision,
    }


def episode_as_dict(episode: Episode) -> dict[str, Any]:
    return {
        "id": episode.id,
        "project": episode.project.slug,
        "category": episode.category,
        "title": episode.title,
        "content": episode.content,
        "files_touched": list(episode.files_touched),
        "entities_mentioned": list(episode.entities_mentioned),
        "metadata": dict(episode.metadata),
        "occurred_at": iso(episode.occurred_at),
        "recorded_at": iso(episode.recorded_at),
        "external_id": episode.external_id,
        "sha256": episode.sha256,
        "revision": episode.revision,
    }


def entity_as_dict(entity: Entity) -> dict[str, Any]:
    return {
        "id": entity.slug,
        "kind": entity.kind,
        "name": entity.name,
        "aliases": list(entity.aliases),
        "created_at": iso(entity.created_at),
    }


# --- change feeds for cached indexes ----------------------------------------------------------


def graph_revision_current(*, project: Project) -> int:
    """The project's graph revision: 0 before its first write."""
    row = GraphRevision.objects.filter(project=project).values_list("revision", flat=True).first()
    return int(row or 0)


def facts_changed_since(*, project: Project, revision: int) -> QuerySet[TemporalFact]:
    """Facts created or changed (closed, retracted) after ``revision``, oldest change first."""
    return (
        TemporalFact.objects.filter(project=project, revision__gt=revision)
        .select_related(*FACT_RELATED, "source_episode")
        .order_by("revision", "id")
    )


def episodes_changed_since(*, project: Project, revision: int) -> QuerySet[Episode]:
    """Episodes recorded after ``revision`` (episodes are immutable), oldest first."""
    return (
        Episode.objects.filter(project=project, revision__gt=revision)
        .select_related("project")
        .order_by("revision", "id")
    )


# --- lists and single items -------------------------------------------------------------------


def facts_query(
    *,
    project: Project,
    subject: str | None = None,
    predicate: str | None = None,
    active: bool | None = None,
    valid_at: datetime | None = None,
) -> QuerySet[TemporalFact]:
    qs = TemporalFact.objects.filter(project=project).select_related(*FACT_RELATED)
    if subject:
        qs = qs.filter(subject__slug=subject)
    if predicate:
        qs = qs.filter(predicate=predicate)
    if active is True:
        qs = qs.filter(valid_until__isnull=True)
    elif active is False:
        qs = qs.filter(valid_until__isnull=False)
    if valid_at is not None:
        qs = qs.filter(valid_from__lte=valid_at).filter(
            Q(valid_until__isnull=True) | Q(valid_until__gt=valid_at)
        )
    return qs.order_by("recorded_at", "id")


def fact_get(*, fact_id: str, project_ids: Iterable[int] | None) -> TemporalFact:
    qs = TemporalFact.objects.select_related(*FACT_RELATED).filter(pk=fact_id)
    if project_ids is not None:
        qs = qs.filter(project_id__in=list(project_ids))
    fact = qs.first()
    if fact is None:
        raise NotFoundError(f"fact_id: no fact '{fact_id}'", field="fact_id")
    return fact


def episode_get(*, episode_id: str, project_ids: Iterable[int] | None) -> dict[str, Any]:
    qs = Episode.objects.select_related("project").filter(pk=episode_id)
    if project_ids is not None:
        qs = qs.filter(project_id__in=list(project_ids))
    episode = qs.first()
    if episode is None:
        raise NotFoundError(f"episode_id: no episode '{episode_id}'", field="episode_id")
    return episode_as_dict(episode)


def episodes_query(
    *,
    project: Project,
    category: str | None = None,
    entity: str | None = None,
    file: str | None = None,
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
) -> QuerySet[Episode]:
    qs = Episode.objects.filter(project=project).select_related("project")
    if category:
        qs = qs.filter(category=category)
    if entity:
        qs = qs.filter(entities__slug=entity)
    if file:
        path = file.rstrip("/")
        qs = qs.filter(Q(files__path=path) | Q(files__path__startswith=path + "/")).distinct()
    if occurred_after is not None:
        qs = qs.filter(occurred_at__gte=occurred_after)
    if occurred_before is not None:
        qs = qs.filter(occurred_at__lt=occurred_before)
    return qs.order_by("-occurred_at", "id")


def entities_query(
    *, project: Project, kind: str | None = None, search: str | None = None
) -> QuerySet[Entity]:
    qs = Entity.objects.filter(project=project)
    if kind:
        qs = qs.filter(kind=kind)
    if search:
        qs = qs.filter(Q(slug__icontains=search) | Q(name__icontains=search))
    return qs.order_by("slug")


# --- entity query -----------------------------------------------------------------------------


def entity_query(
    *,
    project: Project,
    entity_id: str,
    max_hops: int = 2,
    include_superseded: bool = False,
) -> dict[str, Any]:
    """An entity with its active facts, its history (superseded and retracted facts, with their
    validity and successor), the episodes that mention it or are the source of its facts, and
    its ego graph: every entity within ``max_hops`` over active edges, in either direction.

    History is always answered; ``include_superseded`` also lists those facts among ``facts``.
    """
    if isinstance(max_hops, bool) or not isinstance(max_hops, int):
        raise validation_error("max_hops", f"must be an integer from 0 to {MAX_HOPS}")
    if not 0 <= max_hops <= MAX_HOPS:
        raise validation_error("max_hops", f"must be from 0 to {MAX_HOPS}, got {max_hops}")
    entity = Entity.objects.filter(project=project, slug=entity_id).first()
    if entity is None:
        raise NotFoundError(f"entity_id: no entity '{entity_id}'", field="entity_id")

    # Entities belong to one project, so the entity's row id alone selects its facts; leaving
    # the project out lets each lookup use its foreign-key index (one per direction).
    as_subject = TemporalFact.objects.filter(subject=entity).select_related(*FACT_RELATED)
    as_object = (
        TemporalFact.objects.filter(object_entity=entity)
        .exclude(subject=entity)
        .select_related(*FACT_RELATED)
    )
    own = sorted(
        [*as_subject.order_by(), *as_object.order_by()],
        key=lambda f: (f.subject.slug, f.predicate, f.valid_from, f.recorded_at, f.id),
    )
    active = [f for f in own if f.valid_until is None]
    history = [f for f in own if f.valid_until is not None]
    facts = own if include_superseded else active

    episode_ids = set(
        TemporalFact.objects.filter(subject=entity, source_episode__isnull=False)
        .order_by()
        .values_list("source_episode_id", flat=True)
    )
    episode_ids.update(
        Episode.entities.through.objects.filter(entity_id=entity.pk).values_list(
            "episode_id", flat=True
        )
    )
    episodes = sorted(
        Episode.objects.filter(id__in=episode_ids).select_related("project").order_by(),
        key=lambda e: (-e.occurred_at.timestamp(), e.id),
    )

    # Walk by entity row id so every hop is answered from the foreign-key indexes.
    ids = {entity.slug: entity.pk}
    kinds = {entity.slug: entity.kind}
    active_edges = TemporalFact.objects.filter(
        valid_until__isnull=True, object_entity__isnull=False
    ).order_by()
    columns = (
        "id",
        "subject__slug",
        "predicate",
        "object_entity__slug",
        "subject_id",
        "object_entity_id",
        "subject__kind",
        "object_entity__kind",
    )

    def edges_touching(nodes: set[str]) -> Iterator[Edge]:
        wanted = [ids[node] for node in nodes]
        seen: set[str] = set()
        # One lookup per foreign-key index instead of an OR that scans; chunks stay under the
        # databases' bound-parameter limits on wide frontiers.
        for lookup in ("subject_id__in", "object_entity_id__in"):
            for start in range(0, len(wanted), EGO_CHUNK):
                chunk = wanted[start : start + EGO_CHUNK]
                rows = active_edges.filter(**{lookup: chunk}).values_list(*columns)
                for fact_id, source, predicate, target, s_pk, t_pk, s_kind, t_kind in rows:
                    if fact_id in seen:
                        continue
                    seen.add(fact_id)
                    ids.setdefault(source, s_pk)
                    ids.setdefault(target, t_pk)
                    kinds.setdefault(source, s_kind)
                    kinds.setdefault(target, t_kind)
                    yield Edge(fact_id=fact_id, source=source, predicate=predicate, target=target)

    ego = ego_graph(entity.slug, max_hops, edges_touching)
    return {
        "entity": entity_as_dict(entity),
        "facts": [fact_as_dict(f) for f in facts],
        "history": [fact_as_dict(f) for f in history],
        "episodes": [episode_as_dict(e) for e in episodes],
        "ego_graph": {
            "max_hops": max_hops,
            "nodes": [
                {"id": node, "kind": kinds.get(node, ""), "hops": hops}
                for node, hops in sorted(ego.distances.items(), key=lambda kv: (kv[1], kv[0]))
            ],
            "edges": [
                {
                    "fact_id": e.fact_id,
                    "source": e.source,
                    "predicate": e.predicate,
                    "target": e.target,
                }
                for e in ego.edges
            ],
        },
    }


# --- time travel ------------------------------------------------------------------------------


def _fact_canonical_of_values(row: dict[str, Any], project_slug: str) -> dict[str, Any]:
    return fact_canonical(
        id=row["id"],
        project=project_slug,
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


FACT_VALUE_FIELDS = (
    "id",
    "subject__slug",
    "predicate",
    "object_value",
    "object_entity__slug",
    "singular",
    "confidence",
    "valid_from",
    "valid_until",
    "recorded_at",
    "closed_at",
    "superseded_by_id",
    "source_episode_id",
    "sha256",
)


@dataclass(frozen=True)
class VisibleFact:
    """A fact as it read at some transaction time: its canonical form and its API view."""

    canonical: dict[str, Any]
    view: dict[str, Any]


def facts_visible_at(*, project: Project, as_of: datetime, known_at: datetime) -> list[VisibleFact]:
    """The facts valid at ``as_of`` as they were known at ``known_at``, sorted by id.

    Transaction time first: a fact recorded after ``known_at`` is invisible, and a closure
    recorded after ``known_at`` had not happened yet (the fact reads as open). Then valid time:
    ``valid_from <= as_of < valid_until``. History rows are never rewritten, so a backdated fact
    may overlap an older closed one; for a singular predicate the fact starting latest wins.
    """
    rows = (
        TemporalFact.objects.filter(
            project=project, recorded_at__lte=known_at, valid_from__lte=as_of
        )
        .filter(Q(valid_until__isnull=True) | Q(valid_until__gt=as_of) | Q(closed_at__gt=known_at))
        .values(*FACT_VALUE_FIELDS)
    )
    visible: list[VisibleFact] = []
    winners: dict[tuple[str, str], tuple[datetime, datetime, str]] = {}
    for row in rows:
        known_closed = closure_known(row["closed_at"], known_at)
        if known_closed and row["valid_until"] is not None and row["valid_until"] <= as_of:
            continue
        seen = fact_as_known_at(
            _fact_canonical_of_values(row, project.slug),
            closed_at=row["closed_at"],
            known_at=known_at,
        )
        closed = known_closed and row["valid_until"] is not None
        view = {
            "id": row["id"],
            "project": project.slug,
            "subject": row["subject__slug"],
            "predicate": row["predicate"],
            "object_value": row["object_value"],
            "object_entity": row["object_entity__slug"],
            "singular": row["singular"],
            "confidence": row["confidence"],
            "valid_from": iso(row["valid_from"]),
            "valid_until": iso(row["valid_until"]) if closed else None,
            "recorded_at": iso(row["recorded_at"]),
            "closed_at": iso(row["closed_at"]) if closed else None,
            "superseded_by": row["superseded_by_id"] if closed else None,
            "source_episode": row["source_episode_id"],
            "status": (
                ("superseded" if row["superseded_by_id"] else "retracted") if closed else "active"
            ),
        }
        visible.append(VisibleFact(canonical=seen, view=view))
        if row["singular"]:
            key = (row["subject__slug"], row["predicate"])
            rank = (row["valid_from"], row["recorded_at"], row["id"])
            if key not in winners or rank > winners[key]:
                winners[key] = rank
    result = [
        f
        for f in visible
        if not f.view["singular"]
        or winners[(f.view["subject"], f.view["predicate"])][2] == f.view["id"]
    ]
    result.sort(key=lambda f: f.view["id"])
    return result


def graph_as_of(
    *, project: Project, as_of: datetime | str, known_at: datetime | str | None = None
) -> dict[str, Any]:
    """The facts valid at ``as_of`` as known at transaction time ``known_at`` (default: now),
    with a snapshot hash: the RFC 6962 Merkle root over their canonical forms as then known
    (each fact's ``sha256`` is that of its form as then known)."""
    as_of_dt = parse_aware_datetime(as_of, field="as_of", required=True)
    known_dt = parse_aware_datetime(known_at, field="known_at") or utcnow()
    assert as_of_dt is not None
    facts = facts_visible_at(project=project, as_of=as_of_dt, known_at=known_dt)
    leaves = [canonical_json(f.canonical) for f in facts]
    return {
        "project": project.slug,
        "as_of": iso(as_of_dt),
        "known_at": iso(known_dt),
        "count": len(facts),
        "snapshot_hash": merkle_root(leaves),
        "facts": [
            {**f.view, "sha256": sha256_hex(leaf)} for f, leaf in zip(facts, leaves, strict=True)
        ],
    }


# --- integrity --------------------------------------------------------------------------------


def integrity_verify(*, project: Project) -> dict[str, Any]:
    """Recomputes every fact's and episode's SHA-256 from its canonical JSON and the Merkle
    root over all of them (facts by id, then episodes by id); names every record whose stored
    hash no longer matches its content."""
    leaves: list[bytes] = []
    mismatches: list[dict[str, str]] = []
    facts = 0
    for row in (
        TemporalFact.objects.filter(project=project).order_by("id").values(*FACT_VALUE_FIELDS)
    ):
        data = canonical_json(_fact_canonical_of_values(row, project.slug))
        computed = sha256_hex(data)
        if computed != row["sha256"]:
            mismatches.append(
                {"kind": "fact", "id": row["id"], "stored": row["sha256"], "computed": computed}
            )
        leaves.append(data)
        facts += 1
    episodes = 0
    for ep in (
        Episode.objects.filter(project=project)
        .order_by("id")
        .values(
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
            "sha256",
        )
    ):
        data = canonical_json(
            episode_canonical(
                id=ep["id"],
                project=project.slug,
                category=ep["category"],
                title=ep["title"],
                content=ep["content"],
                files_touched=ep["files_touched"] or [],
                entities_mentioned=ep["entities_mentioned"] or [],
                metadata=ep["metadata"] or {},
                occurred_at=ep["occurred_at"],
                recorded_at=ep["recorded_at"],
                external_id=ep["external_id"],
            )
        )
        computed = sha256_hex(data)
        if computed != ep["sha256"]:
            mismatches.append(
                {"kind": "episode", "id": ep["id"], "stored": ep["sha256"], "computed": computed}
            )
        leaves.append(data)
        episodes += 1
    return {
        "project": project.slug,
        "verified": not mismatches,
        "facts": facts,
        "episodes": episodes,
        "records": facts + episodes,
        "merkle_root": merkle_root(leaves),
        "mismatched_ids": [m["id"] for m in mismatches],
        "mismatches": mismatches,
        "checked_at": iso(utcnow()),
    }


# --- summary ----------------------------------------------------------------------------------


def graph_summary(*, project: Project) -> dict[str, Any]:
    """Counts of the project's graph (facts by status, episodes by category), its revision and
    the integrity result with the Merkle root over every record."""
    integrity = integrity_verify(project=project)
    facts = TemporalFact.objects.filter(project=project).aggregate(
        active=Count("id", filter=Q(valid_until__isnull=True)),
        superseded=Count("id", filter=Q(superseded_by__isnull=False)),
        retracted=Count("id", filter=Q(valid_until__isnull=False, superseded_by__isnull=True)),
    )
    by_category = dict.fromkeys(EpisodeCategory.values, 0)
    for row in (
        Episode.objects.filter(project=project)
        .values("category")
        .annotate(n=Count("id"))
        .order_by()
    ):
        by_category[row["category"]] = row["n"]
    return {
        "project": project.slug,
        "revision": graph_revision_current(project=project),
        "entities": Entity.objects.filter(project=project).count(),
        "facts": {"total": integrity["facts"], **facts},
        "episodes": {"total": integrity["episodes"], "by_category": by_category},
        "merkle_root": integrity["merkle_root"],
        "verified": integrity["verified"],
        "mismatched_ids": integrity["mismatched_ids"],
    }
