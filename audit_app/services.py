"""Writes of the audit trail: appending to the injection log (the one path that writes its
records: receipts, and erasure and purge events), storing and erasing delivered texts,
checkpoints, the retention purge, and running the contradiction auditor.

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
from datetime import date, datetime, timedelta
from functools import cache, partial
from typing import Any, cast

import rfc8785
from django.conf import settings
from django.db import models, transaction
from django.db.models import Exists, OuterRef

from audit_app.checkpoints import audit_checkpoint_create, witness_checkpoint
from audit_app.contracts import (
    ChainPoint,
    ContradictionAuditInput,
    ContradictionAuditResult,
    PurgeResult,
)
from audit_app.domain.chain import (
    RECORD_FORMAT,
    record_hash,
    sha256_text,
)
from audit_app.domain.contradictions import (
    DEFAULT_ANTONYMS,
    Finding,
    RuleBook,
    contradictions_find,
)
from audit_app.finding_selectors import facts_held_at, finding_view, findings_by_fingerprint
from audit_app.models import (
    GENESIS_HASH,
    AuditRun,
    ContradictionFinding,
    DeliveredText,
    ErasedText,
    FindingState,
    InjectionLogHead,
    InjectionRecord,
    audit_maintenance,
    record_payload,
)
from audit_app.receipt_sources import receipt_sources_add
from audit_app.selectors import chain_anchor, injection_log_verify
from graph_app.domain.hashing import canonical_json
from graph_app.services import fact_supersede
from memoryproject import sql
from memoryproject.collector import collector_paused
from memoryproject.contracts import Caller, has_nul, takes
from memoryproject.errors import ApplicationError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import iso, utcnow
from memoryproject.witness import LOG_STREAM, witness_head_advance
from memoryproject.writes import write_transaction

__all__ = [
    "EVENT_KINDS",
    "ITEM_KINDS",
    "SOURCES",
    "audit_checkpoint_create",
    "audit_event_append",
    "audit_log_purge",
    "audit_maintenance",
    "contradictions_audit",
    "delivered_text_erase",
    "injection_log_append",
    "record_payload",
]

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


def _head_locked() -> InjectionLogHead:
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
    except (TypeError, ValueError, rfc8785.CanonicalizationError) as exc:
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
        head = _head_locked()
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
        # Witnessed once committed: a head that was rolled back must never be witnessed.
        transaction.on_commit(
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


# --- retention --------------------------------------------------------------------------------


def _orphan_texts(first: int, through: int) -> Any:
    """The stored texts that only records ``first``..``through`` delivered."""
    purged = InjectionRecord.objects.filter(seq__gte=first, seq__lte=through)
    still_used = InjectionRecord.objects.filter(seq__gt=through, prompt_sha256=OuterRef("sha256"))
    return DeliveredText.objects.filter(sha256__in=purged.values("prompt_sha256")).exclude(
        Exists(still_used)
    )


def _purge_through(first: int, head_seq: int, before: datetime) -> int:
    """The last seq of the contiguous run from ``first`` whose records all precede ``before``:
    nothing younger is ever removed, even if clocks went backwards."""
    young = (
        InjectionRecord.objects.filter(seq__gte=first, created_at__gte=before)
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )
    return head_seq if young is None else young - 1


def _retention_days(before: datetime) -> int:
    """The retention period, once ``before`` is known to lie outside it."""
    days = int(settings.AUDIT_RETENTION_DAYS)
    if before.tzinfo is None:
        raise validation_error("before", "must be timezone-aware")
    limit = utcnow() - timedelta(days=days)
    if before > limit:
        raise validation_error(
            "before",
            f"{iso(before)} is within the retention period ({days} days): records from "
            f"{iso(limit)} on must be kept; give a date on or before {limit.date().isoformat()}",
        )
    return days


def _purge_run(
    *, first: int, last: InjectionRecord, details: dict[str, Any], channel: str, client: str
) -> tuple[int, InjectionRecord]:
    """Removes records ``first``..``last`` and their orphaned texts through the gate, then
    appends the purge event that anchors what remains."""
    through = last.seq
    purged = InjectionRecord.objects.filter(seq__gte=first, seq__lte=through)
    anchor = {"kind": "purge", "seq": through, "hash": last.record_hash}
    with audit_maintenance(
        purpose="purge",
        details={"anchor": anchor, "from_seq": first},
        after=partial(witness_checkpoint, reason="purge"),
    ):
        texts, _ = _orphan_texts(first, through).delete()
        # Rows that index the purged records (they protect them from deletion) go with them.
        for relation in InjectionRecord._meta.related_objects:
            related = cast(type[models.Model], relation.related_model)
            rows = related._default_manager.filter(
                **{f"{relation.field.name}__in": purged.values("pk")}
            )
            rows.delete()
        # One DELETE statement, without loading the records (a purge may remove millions).
        purged._raw_delete(purged.db)
    event = audit_event_append(
        kind="purge",
        project=None,
        channel=channel,
        client=client,
        details={
            **details,
            "from_seq": first,
            "through_seq": through,
            "through_hash": last.record_hash,
            "through_created_at": iso(last.created_at),
            "texts": texts,
        },
    )
    return texts, event


def audit_log_purge(
    *, before: datetime, dry_run: bool = False, channel: str = "cli", client: str = ""
) -> PurgeResult:
    """Removes the oldest records, those created before ``before`` (which must lie outside the
    retention period, ``AUDIT_RETENTION_DAYS``), and the texts only they delivered, then
    appends a purge event naming the seq and hash of the last record removed: verification
    starts from that anchor. Refuses when the log does not verify (the evidence stays)."""
    days = _retention_days(before)
    result: dict[str, Any] = {
        "before": before,
        "retention_days": days,
        "dry_run": dry_run,
        "from_seq": None,
        "through_seq": None,
        "records": 0,
        "texts": 0,
        "event_seq": None,
        "anchor": None,
    }
    with write_transaction():
        head = _head_locked()
        first = chain_anchor().seq + 1
        through = _purge_through(first, head.seq, before)
        count = InjectionRecord.objects.filter(seq__gte=first, seq__lte=through).count()
        if count == 0:
            return PurgeResult(**result)
        if not injection_log_verify().ok:
            raise ApplicationError(
                "the injection log does not verify: purge refused so the evidence stays "
                "(run injection_log_verify)"
            )
        last = InjectionRecord.objects.get(seq=through)
        plan = {
            "from_seq": first,
            "through_seq": through,
            "records": count,
            "anchor": ChainPoint(seq=through, hash=last.record_hash),
        }
        if dry_run:
            return PurgeResult(**{**result, **plan, "texts": _orphan_texts(first, through).count()})
        texts, event = _purge_run(
            first=first,
            last=last,
            details={"before": iso(before), "retention_days": days, "records": count},
            channel=channel,
            client=client,
        )
    return PurgeResult(**{**result, **plan, "texts": texts, "event_seq": event.seq})


# --- the contradiction auditor ------------------------------------------------------------------


def rule_book() -> RuleBook:
    """The contradiction rules as this installation extends them (see settings)."""
    return RuleBook(
        antonyms=(*DEFAULT_ANTONYMS, *((str(a), str(b)) for a, b in settings.MEMORY_ANTONYMS)),
        aliases=dict(settings.MEMORY_PREDICATE_ALIASES),
        singular=frozenset(settings.MEMORY_SINGULAR_PREDICATES),
        relational=frozenset(settings.MEMORY_RELATIONAL_PREDICATES),
    )


def _record_finding(
    project: Project, run: AuditRun, found: Finding, known: dict[str, ContradictionFinding]
) -> ContradictionFinding | None:
    """Stores a finding of this run; None when a person already dismissed or resolved it and
    its facts have not changed since."""
    finding = known.get(found.fingerprint)
    if finding is not None and finding.state != FindingState.OPEN:
        return None
    if finding is None:
        finding = ContradictionFinding(
            project=project,
            first_run=run,
            fingerprint=found.fingerprint,
            rule=found.rule,
            subject=found.subject,
            fact_ids=list(found.fact_ids),
            evidence=found.evidence,
            suggestion=found.suggestion,
            keep_fact=found.keep or "",
        )
    finding.last_seen_run = run
    finding.save()
    return finding


def _auto_resolve(project: Project, found: Finding, finding: ContradictionFinding) -> None:
    assert found.keep is not None
    for old in found.retire:
        fact_supersede(project=project, fact_id=old, by=found.keep)
    finding.state = FindingState.RESOLVED
    finding.settled_by = "auto-resolve"
    finding.reason = f"rule {found.rule}: kept {found.keep}, retired {', '.join(found.retire)}"
    finding.settled_at = utcnow()
    finding.save()


def _close_vanished(project: Project, seen: set[str], run: AuditRun) -> None:
    """Open findings whose facts no longer conflict (changed, retracted) are settled."""
    ContradictionFinding.objects.filter(project=project, state=FindingState.OPEN).exclude(
        fingerprint__in=seen
    ).update(
        state=FindingState.RESOLVED,
        settled_by="auditor",
        reason=f"no longer found by run {run.pk}: the facts changed",
        settled_at=utcnow(),
    )


@takes(ContradictionAuditInput)
def contradictions_audit(
    *, project: Project, params: ContradictionAuditInput, caller: Caller
) -> ContradictionAuditResult:
    """Checks the facts held at ``as_of`` (default now) against the contradiction rules, stores
    the run and its findings and, with ``auto_resolve``, retires the older side of every
    resolvable conflict through supersession (history keeps it; the finding records the rule
    and the evidence). A finding a person dismissed is not reported again until its facts
    change."""
    started = utcnow()
    at = params.as_of or started
    with collector_paused():  # every held fact read at once
        held = facts_held_at(project=project, at=at)
        found = contradictions_find(held, rule_book())
    with write_transaction():
        run = AuditRun.objects.create(
            project=project,
            started_at=started,
            finished_at=started,
            as_of=at,
            facts_checked=len(held),
            findings=0,
            channel=caller.channel,
            client=caller.client,
        )
        known = findings_by_fingerprint(project=project)
        reported = []
        for item in found:
            finding = _record_finding(project, run, item, known)
            if finding is None:
                continue
            if params.auto_resolve and item.resolvable:
                _auto_resolve(project, item, finding)
                run.auto_resolved += 1
            reported.append(finding)
        _close_vanished(project, {f.fingerprint for f in reported}, run)
        run.findings = sum(1 for f in reported if f.state == FindingState.OPEN)
        run.finished_at = utcnow()
        run.save()
    return ContradictionAuditResult(
        run_id=run.pk,
        project=project.slug,
        as_of=at,
        facts_checked=len(held),
        open=run.findings,
        auto_resolved=run.auto_resolved,
        findings=[finding_view(f) for f in reported],
    )


def finding_settle(
    *, finding: ContradictionFinding, state: str, by: str, reason: str
) -> ContradictionFinding:
    """A person resolves or dismisses a finding, with a reason; the decision is appended to
    the injection log (event "review") in the same transaction."""
    if state not in (FindingState.RESOLVED, FindingState.DISMISSED):
        raise validation_error("state", "must be resolved or dismissed")
    if not reason.strip():
        raise validation_error("reason", "must not be empty: say why")
    with write_transaction():
        finding.state, finding.settled_by = state, by
        finding.reason, finding.settled_at = reason.strip(), utcnow()
        finding.save(update_fields=["state", "settled_by", "reason", "settled_at"])
        audit_event_append(
            kind="review",
            project=finding.project,
            channel="admin",
            client=by,
            details={
                "subject": "finding",
                "finding_id": finding.pk,
                "rule": finding.rule,
                "fact_ids": list(finding.fact_ids),
                "decision": str(state),
                "reason": finding.reason,
                "by": by,
            },
        )
    return finding
