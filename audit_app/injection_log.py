"""Appending to the injection log: the one path that writes its records (receipts, and
erasure, purge and review events), and the store of the texts they delivered.

Callers invoke appends inside their own ``write_transaction`` so the record commits with the
decision it receipts. The chain head row is locked with SELECT ... FOR UPDATE (PostgreSQL); on
SQLite the IMMEDIATE transaction mode already holds the database write lock from BEGIN, so
appends are serialised there too. ``seq`` and ``record_hash`` are unique as a last line of
defence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from functools import cache, partial
from typing import Any

from audit_app.checkpoints import witness_checkpoint
from audit_app.domain.chain import RECORD_FORMAT, record_hash, sha256_text
from audit_app.models import (
    DeliveredText,
    ErasedText,
    InjectionLogHead,
    InjectionRecord,
    audit_maintenance,
    record_payload,
)
from audit_app.receipt_sources import receipt_sources_add
from memoryproject import sql
from memoryproject.contracts import has_nul
from memoryproject.domain.canonical import CanonicalizationError, canonical_json
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.errors import ApplicationError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import iso, utcnow
from memoryproject.witness import LOG_STREAM, witness_head_advance
from memoryproject.writes import after_turn, write_transaction

SOURCES = ("plan", "load", "compile", "prompt")
# "review": a person's decision on a flagged context or a contradiction finding.
EVENT_KINDS = ("erasure", "purge", "review")
ITEM_KINDS = ("trace", "summary", "fact", "episode")
PURGE_ANCHOR = frozenset({"before", "through_seq", "through_hash", "through_created_at"})
_SHA256 = re.compile(r"[0-9a-f]{64}")


_HEAD_FIELDS = ("pk", "seq", "last_hash")


@cache
def _head_sql() -> str:
    return (
        f"{sql.select(InjectionLogHead, _HEAD_FIELDS)} "
        f"WHERE {sql.column(InjectionLogHead, 'pk')} = 1{sql.for_update()}"
    )


@cache
def _head_move_sql() -> str:
    seq, last_hash = (sql.column(InjectionLogHead, f) for f in ("seq", "last_hash"))
    return (
        f"UPDATE {sql.table(InjectionLogHead)} SET {seq} = %s, {last_hash} = %s "
        f"WHERE {sql.column(InjectionLogHead, 'pk')} = 1 AND {seq} = %s"
    )


def injection_log_head_locked() -> InjectionLogHead:
    """The chain head, locked for this transaction (made at genesis on the first append)."""
    head = sql.first(InjectionLogHead, _HEAD_FIELDS, _head_sql())
    if head is None:
        head, _ = InjectionLogHead.objects.select_for_update().get_or_create(
            pk=1, defaults={"seq": 0, "last_hash": GENESIS_HASH}
        )
    return head


def _head_move(head: InjectionLogHead, seq: int, last_hash: str) -> None:
    """Moves the head one record forward (the database's trigger checks the record exists)."""
    if sql.execute(_head_move_sql(), [seq, last_hash, head.seq]) != 1:
        raise ApplicationError("the injection log's head moved during the append")
    head.seq, head.last_hash = seq, last_hash
    head.__dict__["_stored_seq"] = seq


def _json_value(value: object) -> object:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _plain_json(value: Mapping[str, Any] | None, field: str) -> dict[str, Any]:
    """``value`` as the database will give it back (so the hash written is the hash read):
    JSON types only, timestamps as ISO strings, numbers RFC 8785 can canonicalise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise validation_error(field, "must be a JSON object")
    try:
        data: dict[str, Any] = json.loads(
            json.dumps(dict(value), default=_json_value, allow_nan=False)
        )
        canonical_json(data)  # what the record's hash will canonicalise
    except (TypeError, ValueError, CanonicalizationError) as exc:
        raise validation_error(field, f"must hold plain JSON values ({exc})") from None
    if has_nul(data):
        # PostgreSQL cannot store NUL in jsonb; refuse it on every database alike.
        raise validation_error(field, "must not contain NUL characters")
    return data


def _delivered_items(items: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    checked = []
    for n, item in enumerate(items):
        if not isinstance(item, Mapping) or set(item) != {"kind", "id", "sha256"}:
            raise validation_error("items", f"item {n} must be an object of kind, id and sha256")
        if item["kind"] not in ITEM_KINDS:
            raise validation_error(
                "items", f"item {n}: kind must be one of {', '.join(ITEM_KINDS)}"
            )
        if not isinstance(item["id"], str) or not item["id"] or "\x00" in item["id"]:
            raise validation_error("items", f"item {n}: id must be a non-empty string")
        if not isinstance(item["sha256"], str) or not _SHA256.fullmatch(item["sha256"]):
            raise validation_error("items", f"item {n}: sha256 must be 64 lowercase hex digits")
        checked.append({"kind": item["kind"], "id": item["id"], "sha256": item["sha256"]})
    return checked


def _text_store(text: str, digest: str) -> str:
    """Keeps ``text`` once under its SHA-256 and answers what the store now holds for it: an
    erased text is not stored again (its erasure stands)."""
    if not text:
        return ""
    if sql.fetch(_text_held_sql(DeliveredText), [digest]):
        return text  # kept already (an erased text is not in the store)
    if sql.fetch(_text_held_sql(ErasedText), [digest]):
        return ""
    sql.execute(_text_keep_sql(), [digest, text, sql.value(DeliveredText, "stored_at", utcnow())])
    return text


@cache
def _text_held_sql(model: type[DeliveredText] | type[ErasedText]) -> str:
    return f"SELECT 1 FROM {sql.table(model)} WHERE {sql.column(model, 'sha256')} = %s"


@cache
def _text_keep_sql() -> str:
    names = sql.columns(DeliveredText, ("sha256", "text", "stored_at"))
    return (
        f"INSERT INTO {sql.table(DeliveredText)} ({names}) VALUES (%s, %s, %s) "
        "ON CONFLICT DO NOTHING"
    )


def _append(*, text: str, **fields: Any) -> InjectionRecord:
    """Links one record after the head, stores its text and moves the head (one transaction:
    the caller's when there is one; no savepoint, a failed append fails the whole decision)."""
    with write_transaction(savepoint=False):
        head = injection_log_head_locked()
        record = InjectionRecord(
            seq=head.seq + 1,
            format=RECORD_FORMAT,
            prompt_sha256=sha256_text(text),
            created_at=utcnow(),
            prev_hash=head.last_hash,
            **fields,
        )
        record.record_hash = record_hash(record_payload(record))
        sql.insert(record)
        record.__dict__["_system_prompt"] = _text_store(text, record.prompt_sha256)
        _head_move(head, record.seq, record.record_hash)
        # Witnessed once committed: a head that was rolled back must never be witnessed; the next
        # writer need not wait for it (a head only moves forward, whichever lands first).
        after_turn(
            partial(
                witness_head_advance,
                LOG_STREAM,
                record.seq,
                record.record_hash,
                created_at=iso(record.created_at),
            )
        )
    return record


def injection_log_append(
    *,
    project: Project,
    channel: str,
    client: str,
    status: str,
    decision: str,
    trust_score: float,
    threshold: float,
    mode: str,
    trace_ids: Sequence[str],
    system_prompt: str,
    generated_at: datetime,
    source: str = "plan",
    request: Mapping[str, Any] | None = None,
    items: Sequence[Mapping[str, str]] = (),
    client_reported: str = "",
    item_rows: Mapping[tuple[str, str], int] | None = None,
) -> InjectionRecord:
    """Appends one receipt to the chain and answers it: what was asked (``request``), what was
    delivered (``items``, each with its content hash) and the SHA-256 of the exact text, which
    is stored apart (``InjectionRecord.system_prompt`` reads it back). ``client`` is the
    authenticated identity; ``client_reported`` the name the client gave itself (unverified).
    ``item_rows``: the source rows of items the caller has just read, by (kind, id)."""
    if source not in SOURCES:
        raise ApplicationError(f"source: must be one of {', '.join(SOURCES)}", field="source")
    if not isinstance(channel, str) or not channel.strip():
        raise ApplicationError("channel: must be a non-empty string", field="channel")
    if generated_at.tzinfo is None:
        raise ApplicationError("generated_at: must be timezone-aware", field="generated_at")
    asked, delivered = _plain_json(request, "request"), _delivered_items(items)
    with write_transaction(savepoint=False):
        record = _append(
            text=system_prompt,
            project=project,
            source=source,
            channel=channel.strip()[:32],
            client=(client or "")[:200],
            client_reported=(client_reported or "")[:200],
            status=status,
            decision=decision,
            trust_score=float(trust_score),
            threshold=float(threshold),
            mode=mode,
            trace_ids=[str(t) for t in trace_ids],
            request=asked,
            items=delivered,
            generated_at=generated_at,
        )
        receipt_sources_add(record, delivered, item_rows)
    return record


def audit_event_append(
    *,
    kind: str,
    project: Project | None,
    details: Mapping[str, Any],
    channel: str = "cli",
    client: str = "",
) -> InjectionRecord:
    """Appends an erasure, purge or review event to the same chain. An event delivers
    nothing: its ``source`` is the kind, ``request`` holds the details, status "recorded", mode
    "event", no decision, scores 0, no traces, items or text."""
    if kind not in EVENT_KINDS:
        raise validation_error("kind", f"must be one of {', '.join(EVENT_KINDS)}")
    if kind == "purge" and not set(details) >= PURGE_ANCHOR:
        # Verification starts from the latest purge's anchor: it must state one.
        raise validation_error("details", f"a purge must state {', '.join(sorted(PURGE_ANCHOR))}")
    now = utcnow()
    return _append(
        text="",
        project=project,
        source=kind,
        channel=(channel or "cli").strip()[:32] or "cli",
        client=(client or "")[:200],
        status="recorded",
        decision="",
        trust_score=0.0,
        threshold=0.0,
        mode="event",
        trace_ids=[],
        request=_plain_json(details, "details"),
        items=[],
        generated_at=now,
    )


def delivered_text_erase(*, sha256: str, reason: str = "") -> bool:
    """Removes a delivered text from the store, leaving its tombstone (when, why): the records
    that delivered it keep verifying, since the chain hashes only the SHA-256. Answers whether
    a stored text was removed (False when none was stored, or it was erased before)."""
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise validation_error("sha256", "must be 64 lowercase hex digits")
    with write_transaction():
        ErasedText.objects.bulk_create(
            [ErasedText(sha256=sha256, erased_at=utcnow(), reason=reason.strip())],
            ignore_conflicts=True,
        )
        with audit_maintenance(
            purpose="erasure",
            details={"sha256": sha256},
            after=partial(witness_checkpoint, reason="erasure"),
        ):
            removed, _ = DeliveredText.objects.filter(sha256=sha256).delete()
    return removed > 0
