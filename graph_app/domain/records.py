"""Canonical forms of facts, episodes, entities and graph changes: what their SHA-256 covers.

Every field that carries meaning is in the form, validity and transaction time included, so a
change to any of them behind the application's back no longer matches the stored hash. The
change-tracking ``revision`` is bookkeeping and deliberately left out of the records' forms; the
change log (``change_canonical``) records it with each change. An episode's file rows and entity
links index the ``files_touched`` and ``entities_mentioned`` its form holds, so verification
requires them to be exactly those. Writers, verifiers and the benchmark's bulk loader all build
their hashes through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any

from memoryproject.domain.canonical import canonical_json, number_json
from memoryproject.domain.hashing import record_sha256 as record_sha256_of
from memoryproject.domain.hashing import sha256_hex
from memoryproject.domain.instants import UtcText, iso_utc, utc_text


def fact_canonical(
    *,
    id: str,
    project: str,
    subject: str,
    predicate: str,
    object_value: str,
    object_entity: str | None,
    singular: bool,
    confidence: float,
    valid_from: datetime | UtcText,
    valid_until: datetime | UtcText | None,
    recorded_at: datetime | UtcText,
    closed_at: datetime | UtcText | None,
    superseded_by: str | None,
    source_episode: str | None,
) -> dict[str, Any]:
    return {
        "type": "fact",
        "id": id,
        "project": project,
        "subject": subject,
        "predicate": predicate,
        "object_value": object_value,
        "object_entity": object_entity,
        "singular": bool(singular),
        "confidence": float(confidence),
        "valid_from": iso_utc(valid_from),
        "valid_until": iso_utc(valid_until),
        "recorded_at": iso_utc(recorded_at),
        "closed_at": iso_utc(closed_at),
        "superseded_by": superseded_by,
        "source_episode": source_episode,
    }


_LEAF_TIMES = {UtcText, type(None)}


def _json_text(value: Any) -> str:
    """A text or None as JSON (the C encoder refuses anything else)."""
    return "null" if value is None else encode_basestring(value)


def fact_leaf(
    project: str,
    id: str,
    subject: str,
    predicate: str,
    object_value: str,
    object_entity: str | None,
    singular: bool,
    confidence: float,
    valid_from: datetime | UtcText | None,
    valid_until: datetime | UtcText | None,
    recorded_at: datetime | UtcText | None,
    closed_at: datetime | UtcText | None,
    superseded_by: str | None,
    source_episode: str | None,
) -> bytes:
    """The canonical JSON of ``fact_canonical`` (positional arguments in its field order).

    Verification canonicalises every fact of a project, so a plain fact (text fields, a float
    confidence, instants already in ``iso_utc``'s form, as a raw read gives them) is laid out
    in RFC 8785's key order in one pass; anything else goes through the general
    canonicaliser. A property test holds both byte-identical.
    """
    times = {type(closed_at), type(recorded_at), type(valid_from), type(valid_until)}
    if type(confidence) is float and times <= _LEAF_TIMES:
        e = encode_basestring  # refuses anything but text
        try:
            # A fact is mostly valid from when it was recorded and closed when it ended: the
            # same text object (``_fact_leaves`` passes one for equal stored texts) is
            # encoded once.
            start, end = _json_text(valid_from), _json_text(valid_until)
            recorded = start if recorded_at is valid_from else _json_text(recorded_at)
            closed = end if closed_at is valid_until else _json_text(closed_at)
            return (
                f'{{"closed_at":{closed},"confidence":{number_json(confidence)},'
                f'"id":{e(id)},"object_entity":{_json_text(object_entity)},'
                f'"object_value":{e(object_value)},"predicate":{e(predicate)},'
                f'"project":{e(project)},"recorded_at":{recorded},'
                f'"singular":{"true" if singular else "false"},'
                f'"source_episode":{_json_text(source_episode)},"subject":{e(subject)},'
                f'"superseded_by":{_json_text(superseded_by)},"type":"fact",'
                f'"valid_from":{start},"valid_until":{end}}}'
            ).encode()
        except (TypeError, UnicodeEncodeError):  # not text, or a lone surrogate
            pass
    form = fact_canonical(
        project=project,
        id=id,
        subject=subject,
        predicate=predicate,
        object_value=object_value,
        object_entity=object_entity,
        singular=singular,
        confidence=confidence,
        valid_from=valid_from,  # type: ignore[arg-type]  # None: a value read as no instant
        valid_until=valid_until,
        recorded_at=recorded_at,  # type: ignore[arg-type]
        closed_at=closed_at,
        superseded_by=superseded_by,
        source_episode=source_episode,
    )
    return canonical_json(form)


def fact_rows_leaves(
    rows: Iterable[Sequence[Any]], project: str
) -> Iterator[tuple[str, Any, Any, bytes]]:
    """(id, stored hash, revision, canonical JSON) of each fact row read raw: the canonical
    fields in ``fact_leaf``'s order (less the project), the stored hash, the revision; instants
    as the database answered them (SQLite's text, or datetimes). Verification reads every fact
    through this, in its own process or in a worker (graph_app.integrity_worker)."""
    for row in rows:
        # Equal stored texts give equal canonical texts: a fact recorded when it became
        # valid, or closed when it ended, has its instant read once.
        start, end = utc_text(row[7]), utc_text(row[8])
        data = fact_leaf(
            project,
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            row[6],
            start,
            end,
            start if row[9] == row[7] else utc_text(row[9]),
            end if row[10] == row[8] else utc_text(row[10]),
            row[11],
            row[12],
        )
        yield row[0], row[13], row[14], data


def closure_known(closed_at: datetime | None, known_at: datetime) -> bool:
    """Whether a fact's closure (recorded at ``closed_at``) was known at ``known_at``."""
    return closed_at is not None and closed_at <= known_at


def fact_as_known_at(
    canonical: Mapping[str, Any], *, closed_at: datetime | None, known_at: datetime
) -> dict[str, Any]:
    """The canonical form as it read at transaction time ``known_at``.

    A closure recorded after ``known_at`` had not happened yet, so the fact was still open.
    """
    seen = dict(canonical)
    if closed_at is not None and not closure_known(closed_at, known_at):
        seen.update(valid_until=None, closed_at=None, superseded_by=None)
    return seen


def episode_canonical(
    *,
    id: str,
    project: str,
    category: str,
    title: str,
    content: str,
    files_touched: Sequence[str],
    entities_mentioned: Sequence[str],
    metadata: Mapping[str, Any],
    occurred_at: datetime,
    recorded_at: datetime,
    external_id: str | None,
) -> dict[str, Any]:
    return {
        "type": "episode",
        "id": id,
        "project": project,
        "category": category,
        "title": title,
        "content": content,
        "files_touched": list(files_touched),
        "entities_mentioned": list(entities_mentioned),
        "metadata": dict(metadata),
        "occurred_at": iso_utc(occurred_at),
        "recorded_at": iso_utc(recorded_at),
        "external_id": external_id,
    }


def sha256_of(canonical: Mapping[str, Any]) -> str:
    return record_sha256_of(dict(canonical))


def entity_canonical(
    *,
    id: str,
    project: str,
    kind: str,
    name: str,
    aliases: Sequence[str],
    created_at: datetime,
) -> dict[str, Any]:
    """An entity as the change log seals it (its id is its slug)."""
    return {
        "type": "entity",
        "id": id,
        "project": project,
        "kind": kind,
        "name": name,
        "aliases": list(aliases),
        "created_at": iso_utc(created_at),
    }


def change_canonical(
    *,
    project: str,
    seq: int,
    revision: int,
    action: str,
    record_type: str,
    record_id: str,
    record_sha256: str,
    erased_sha256: str,
    note: str,
    recorded_at: datetime | UtcText,
    prev_hash: str,
) -> dict[str, Any]:
    """One entry of a project's graph change log: what changed (the record's hash after the
    change; for an erasure also the hash it had) and its link to the previous entry."""
    return {
        "action": action,
        "erased_sha256": erased_sha256,
        "note": note,
        "prev_hash": prev_hash,
        "project": project,
        "record_id": record_id,
        "record_sha256": record_sha256,
        "record_type": record_type,
        "recorded_at": iso_utc(recorded_at),
        "revision": revision,
        "seq": seq,
    }


_INT_LIMIT = 2**53 - 1


def change_hash(
    project: str,
    seq: int,
    revision: int,
    action: str,
    record_type: str,
    record_id: str,
    record_sha256: str,
    erased_sha256: str,
    note: str,
    recorded_at: datetime | UtcText,
    prev_hash: str,
) -> str:
    """The chain hash of a change: SHA-256 of the canonical JSON of ``change_canonical``
    (positional arguments in the order of a stored entry's columns).

    Verification hashes every entry of a project's log, so plain entries (text fields and
    integers in range, which every writer produces) take a fast path that lays the JSON out
    in RFC 8785's key order (sorted; all ASCII) with the C string encoder; anything else goes
    through the general canonicaliser. A property test holds both byte-identical.
    """
    at = iso_utc(recorded_at)
    plain = (
        type(revision) is int
        and type(seq) is int
        and -_INT_LIMIT <= revision <= _INT_LIMIT
        and -_INT_LIMIT <= seq <= _INT_LIMIT
    )
    if plain and at is not None:
        e = encode_basestring  # refuses anything but text
        try:
            text = (
                f'{{"action":{e(action)},"erased_sha256":{e(erased_sha256)},"note":{e(note)},'
                f'"prev_hash":{e(prev_hash)},"project":{e(project)},"record_id":{e(record_id)},'
                f'"record_sha256":{e(record_sha256)},"record_type":{e(record_type)},'
                f'"recorded_at":{e(at)},"revision":{revision},"seq":{seq}}}'
            )
            return sha256_hex(text.encode("utf-8"))
        except (TypeError, UnicodeEncodeError):  # not text, or a lone surrogate
            pass
    form = change_canonical(
        project=project,
        seq=seq,
        revision=revision,
        action=action,
        record_type=record_type,
        record_id=record_id,
        record_sha256=record_sha256,
        erased_sha256=erased_sha256,
        note=note,
        recorded_at=recorded_at,
        prev_hash=prev_hash,
    )
    return record_sha256_of(form)
