"""Integrity verification of a project's graph: every fact's and episode's SHA-256 against its
canonical JSON, the Merkle root over them, the change log's chain, head and checkpoint, and every
fact, episode and entity against the state the log gives it, in full or since a checkpoint;
``integrity_verify`` also holds the answer to the witness outside the database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from django.db.models import Model, Q

from graph_app.change_log_reads import chain_read
from graph_app.contracts.integrity import (
    ChainState,
    CheckpointCheck,
    ErasedRecord,
    IntegrityInput,
    IntegrityProblem,
    IntegrityResult,
    Mismatch,
)
from graph_app.domain.records import sha256_of
from graph_app.domain.sealing import (
    ChainReport,
    FoundRecord,
    Key,
    Problem,
    records_verify,
    unsealed_problems,
)
from graph_app.integrity_worker_client import fact_worker_digests, fact_worker_start
from graph_app.merkle_leaves import episode_leaves, episode_value_rows, fact_leaves
from graph_app.models import Entity, Episode, EpisodeFile, TemporalFact
from graph_app.raw_rows import READ_CHUNK
from graph_app.record_canonical import (
    ENTITY_VALUE_FIELDS,
    EPISODE_VALUE_FIELDS,
    FACT_VALUE_FIELDS,
    entity_canonical_of,
    episode_canonical_of,
    fact_canonical_of,
)
from memoryproject.collector import collector_paused
from memoryproject.contracts import takes
from memoryproject.domain.hashing import RecordDigests, merkle_root_of_leaf_hashes, record_digests
from memoryproject.domain.instants import instant_of
from memoryproject.models import Project
from memoryproject.reads import read_snapshot
from memoryproject.timeutil import utcnow


@takes(IntegrityInput)
def integrity_verify(*, project: Project, params: IntegrityInput) -> IntegrityResult:
    """``integrity_unwitnessed``, then held to the witness outside the database
    (graph_app.witness_check): not verified unless the witness agrees, "unanchored" without
    one."""
    from graph_app.witness_check import integrity_witnessed

    return integrity_witnessed(project, integrity_unwitnessed(project=project, params=params))


@takes(IntegrityInput)
def integrity_unwitnessed(*, project: Project, params: IntegrityInput) -> IntegrityResult:
    """Verifies the project's graph: every fact's and episode's SHA-256 against its canonical
    JSON, the Merkle root over them (facts by id, then episodes by id), the change log's chain,
    head and (when given) a checkpoint, and every fact, episode and entity against the state
    the log gives it. Names every record or log entry at fault and lists the erasures."""
    checkpoint = None
    if params.checkpoint_size is not None and params.checkpoint_head is not None:
        checkpoint = (params.checkpoint_size, params.checkpoint_head)
    with read_snapshot() as own, collector_paused():
        if params.since_checkpoint and checkpoint is not None:
            return _integrity_since(project, checkpoint)
        # A worker reads the snapshot on its own connection: only when it holds nothing
        # uncommitted, that is when verification opened the transaction itself.
        return _integrity_read(project, checkpoint, worker=own)


def _integrity_since(project: Project, checkpoint: tuple[int, str]) -> IntegrityResult:
    """Verification of what changed since ``checkpoint``: the log's entries from it on and
    the records they touched, each read by its key (rows in proportion to the changes)."""
    chain, revision = chain_read(project, checkpoint, since=True)
    touched: dict[str, list[str]] = {}
    for kind, record_id in chain.state:
        touched.setdefault(kind, []).append(record_id)
    leaves: list[bytes] = []
    mismatches: list[Mismatch] = []
    found: dict[Key, FoundRecord] = {}
    fact_ids, episode_ids = touched.get("fact", []), touched.get("episode", [])
    facts = episodes = 0
    for start in range(0, len(fact_ids), READ_CHUNK):
        rows = fact_leaves(project, fact_ids[start : start + READ_CHUNK])
        facts += _verify("fact", record_digests(rows), leaves, mismatches, found)
    episode_rows: list[dict[str, Any]] = []
    for start in range(0, len(episode_ids), READ_CHUNK):
        episode_rows += episode_value_rows(project, episode_ids[start : start + READ_CHUNK])
    episodes = _verify(
        "episode",
        record_digests(episode_leaves(episode_rows, project.slug)),
        leaves,
        mismatches,
        found,
    )
    _index_problems(project, episode_rows, found, [r["id"] for r in episode_rows])
    slugs = touched.get("entity", [])
    entities = sum(
        _entities_found(project, found, slugs[start : start + READ_CHUNK])
        for start in range(0, len(slugs), READ_CHUNK)
    )
    result = _integrity_result(
        project,
        chain,
        found,
        mismatches,
        counts=(facts, episodes, entities),
        merkle="",
        revision=revision,
    )
    return result.model_copy(update={"scope": "since_checkpoint"})


def _integrity_read(
    project: Project, checkpoint: tuple[int, str] | None, *, worker: bool
) -> IntegrityResult:
    """Full verification. ``worker``: a large project's facts may be read and hashed by a
    second process (graph_app.integrity_worker) meanwhile."""
    apart = fact_worker_start(project) if worker else None
    try:
        chain, revision = chain_read(project, checkpoint)
        episode_rows = episode_value_rows(project)
        episode_digests = record_digests(episode_leaves(episode_rows, project.slug))
        fact_digests = fact_worker_digests(*apart) if apart is not None else None
    finally:
        if apart is not None and apart[0].returncode is None:
            apart[0].kill()
            apart[0].communicate()
    if fact_digests is None:
        fact_digests = record_digests(fact_leaves(project))
    leaf_hashes: list[bytes] = []
    mismatches: list[Mismatch] = []
    found: dict[Key, FoundRecord] = {}
    facts = _verify("fact", fact_digests, leaf_hashes, mismatches, found)
    episodes = _verify("episode", episode_digests, leaf_hashes, mismatches, found)
    _index_problems(project, episode_rows, found)
    entities = _entities_found(project, found)
    return _integrity_result(
        project,
        chain,
        found,
        mismatches,
        counts=(facts, episodes, entities),
        merkle=merkle_root_of_leaf_hashes(leaf_hashes).hex(),
        revision=revision,
    )


def _integrity_result(
    project: Project,
    chain: ChainReport,
    found: dict[Key, FoundRecord],
    mismatches: list[Mismatch],
    *,
    counts: tuple[int, int, int],
    merkle: str,
    revision: int,
) -> IntegrityResult:
    rows, unsealed = records_verify(found, chain.state, revision=revision)
    problems = [
        Problem("mismatch", m.kind, m.id, "its content no longer matches its stored sha256")
        for m in mismatches
    ]
    problems += rows
    if unsealed:
        problems += unsealed_problems(unsealed, _originals(project, unsealed))
    problems += chain.problems
    named = [p.id for p in problems if p.record_type != "change"]
    facts, episodes, entities = counts
    return IntegrityResult(
        project=project.slug,
        verified=not problems,
        facts=facts,
        episodes=episodes,
        entities=entities,
        records=facts + episodes,
        merkle_root=merkle,
        mismatched_ids=list(dict.fromkeys(named)),
        mismatches=mismatches,
        problems=[IntegrityProblem(**p._asdict()) for p in problems],
        chain=ChainState(size=chain.size, head=chain.head),
        checkpoint=(
            CheckpointCheck(
                size=chain.checkpoint[0],
                head=chain.checkpoint[1],
                consistent=bool(chain.checkpoint_consistent),
            )
            if chain.checkpoint
            else None
        ),
        erased=[
            ErasedRecord(
                record_type=e.record_type,
                id=e.record_id,
                erased_at=instant_of(e.recorded_at),
                sha256=e.erased_sha256,
                reason=e.note,
                seq=e.seq,
            )
            for e in chain.erased
        ],
        checked_at=utcnow(),
    )


def _verify(
    kind: Literal["fact", "episode"],
    digests: RecordDigests,
    leaf_hashes: list[bytes],
    mismatches: list[Mismatch],
    found: dict[Key, FoundRecord],
) -> int:
    """For each record's digests: appends its Merkle leaf hash to ``leaf_hashes``, a Mismatch
    when the stored hash differs from the computed one, and what was found to ``found``;
    answers how many records there were."""
    ids, stored_hashes, revisions, computed_hashes, leaves = digests
    for record_id, stored, revision, computed in zip(
        ids, stored_hashes, revisions, computed_hashes, strict=True
    ):
        stored_matches = computed == stored
        if not stored_matches:
            mismatches.append(Mismatch(kind=kind, id=record_id, stored=stored, computed=computed))
        found[(kind, record_id)] = FoundRecord(computed, stored_matches, revision)
    leaf_hashes.extend(leaves)
    return len(ids)


def _index_problems(
    project: Project,
    episode_rows: list[dict[str, Any]],
    found: dict[Key, FoundRecord],
    ids: list[str] | None = None,
) -> None:
    """Notes in ``found`` each episode whose file rows or entity links are not the ones it
    recorded (``ids``: only those episodes' index rows are read)."""
    indexes = _episode_indexes(project, ids)
    for row in episode_rows:
        problem = _index_problem(row, *indexes.get(row["id"], ([], [])))
        if problem is not None:
            key = ("episode", row["id"])
            found[key] = found[key]._replace(index_problem=problem)


def _episode_indexes(
    project: Project, ids: list[str] | None = None
) -> dict[str, tuple[list[str], list[str]]]:
    """Each episode's file paths and linked entity ids, as stored, sorted (``ids``: only
    those episodes')."""
    indexes: dict[str, tuple[list[str], list[str]]] = {}
    if ids is not None and not ids:
        return indexes
    scope = Q(episode__project=project) if ids is None else Q(episode_id__in=ids)
    files = EpisodeFile.objects.filter(scope).values_list("episode_id", "path")
    for episode_id, path in files.order_by().iterator(chunk_size=READ_CHUNK):
        indexes.setdefault(episode_id, ([], []))[0].append(path)
    links = Episode.entities.through.objects.filter(scope)
    rows = links.values_list("episode_id", "entity__slug").order_by()
    for episode_id, slug in rows.iterator(chunk_size=READ_CHUNK):
        indexes.setdefault(episode_id, ([], []))[1].append(slug)
    for paths, slugs in indexes.values():
        paths.sort()
        slugs.sort()
    return indexes


def _index_problem(row: Mapping[str, Any], files: list[str], slugs: list[str]) -> str | None:
    """What is wrong with an episode's file rows and entity links, which must index exactly
    the files_touched and entities_mentioned its hash covers."""
    parts = []
    for noun, stored, recorded in (
        ("file rows", files, sorted(row["files_touched"] or [])),
        ("entity links", slugs, sorted(row["entities_mentioned"] or [])),
    ):
        if stored != recorded:
            missing = sorted(set(recorded) - set(stored))
            extra = sorted(set(stored) - set(recorded))
            said = ", ".join(
                f"{label} {', '.join(values)}"
                for label, values in (("missing", missing), ("unexpected", extra))
                if values
            )
            parts.append(f"its {noun} differ from what it recorded ({said or 'repeated'})")
    return "; ".join(parts) or None


def _entities_found(
    project: Project, found: dict[Key, FoundRecord], slugs: list[str] | None = None
) -> int:
    entities = Entity.objects.filter(project=project)
    if slugs is not None:
        entities = entities.filter(slug__in=slugs)
    rows = entities.order_by().values(*ENTITY_VALUE_FIELDS)
    count = 0
    for row in rows.iterator(chunk_size=READ_CHUNK):
        found[("entity", row["slug"])] = FoundRecord(
            sha256_of(entity_canonical_of(row, project.slug))
        )
        count += 1
    return count


_RECORD_ROWS: dict[str, tuple[type[Model], tuple[str, ...], Callable[..., dict[str, Any]]]] = {
    "fact": (TemporalFact, FACT_VALUE_FIELDS, fact_canonical_of),
    "episode": (Episode, EPISODE_VALUE_FIELDS, episode_canonical_of),
    "entity": (Entity, ENTITY_VALUE_FIELDS, entity_canonical_of),
}


def _originals(project: Project, unsealed: list[Key]) -> dict[Key, Key | None]:
    """For each record the log never sealed, the sealed record it copies (same canonical form
    but for its id), if any. Reads the tables again: only runs when something was inserted."""
    originals: dict[Key, Key | None] = {}
    for kind in sorted({k for k, _ in unsealed}):
        model, columns, canonical_of = _RECORD_ROWS[kind]
        wanted = {i for k, i in unsealed if k == kind}
        by_content: dict[str, list[str]] = {}
        for row in model._default_manager.filter(project=project).order_by().values(*columns):
            form = canonical_of(row, project.slug)
            form.pop("id")
            by_content.setdefault(sha256_of(form), []).append(_row_id(row))
        for ids in by_content.values():
            sealed = [i for i in ids if i not in wanted]
            for i in ids:
                if i in wanted:
                    originals[(kind, i)] = (kind, sealed[0]) if sealed else None
    return originals


def _row_id(row: Mapping[str, Any]) -> str:
    """The id of a record row (an entity's id is its slug)."""
    return str(row["id"] if "id" in row else row["slug"])
