"""Reads of the audit trail: the injection log's verification against its anchor, head,
checkpoints (read in audit_app.checkpoint_reads) and the witness (audit_app.witness_checks).
The contradiction auditor's reads are in audit_app.finding_selectors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.db import connection
from django.db.models import Count, Exists, Max, OuterRef

from audit_app.checkpoint_reads import checkpoint_read
from audit_app.contracts import (
    BrokenRecord,
    ChainAnchor,
    ChainPoint,
    ChainVerification,
    CheckpointCheck,
)
from audit_app.domain.chain import (
    EMPTY_TEXT_SHA256,
    MINIMUM_RETENTION_DAYS,
    Break,
    Link,
    Pin,
    chain_walk,
    record_hash,
    sha256_text,
)
from audit_app.models import (
    AuditCheckpoint,
    AuditMaintenanceGrant,
    DeliveredText,
    ErasedText,
    InjectionLogHead,
    InjectionRecord,
    record_payload,
)
from audit_app.witness_checks import log_witness_check, witnessed_checkpoint
from memoryproject.checkpoint_key import checkpoint_key
from memoryproject.contracts import WitnessCheck
from memoryproject.domain.hash_chain import GENESIS_HASH, checkpoint_mac_matches
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import iso, to_utc

TEXT_ALTERED = "system_prompt does not match prompt_sha256"
TEXT_MISSING = "its delivered text is gone from the store and no erasure tombstone says why"
_TRIGGERS = {
    "sqlite": ("_no_update", "_no_delete"),
    "postgresql": ("_no_change", "_no_truncate"),
}
#: The graph change log's triggers (graph_app 0004, replaced by audit_app 0009).
_GRAPH_TRIGGERS = {
    "sqlite": ("graph_change_no_update", "graph_change_no_delete"),
    "postgresql": ("graph_change_no_update_delete", "graph_change_no_truncate"),
}
_APPEND_ONLY_TABLES = (
    InjectionRecord,
    InjectionLogHead,
    DeliveredText,
    ErasedText,
    AuditCheckpoint,
    AuditMaintenanceGrant,
)


# --- the anchor -------------------------------------------------------------------------------


def _latest_purge() -> InjectionRecord | None:
    return InjectionRecord.objects.filter(source="purge").order_by("-seq").first()


def _anchor_of(event: InjectionRecord | None) -> ChainAnchor:
    """Raises ValueError (or KeyError, TypeError) when the event's details are no anchor."""
    if event is None:
        return ChainAnchor(kind="genesis", seq=0, hash=GENESIS_HASH)
    details = event.request
    return ChainAnchor(
        kind="purge",
        seq=int(details["through_seq"]),
        hash=str(details["through_hash"]),
        event_seq=event.seq,
        before=to_utc(details["before"]),
    )


def chain_anchor() -> ChainAnchor:
    """Where the chain starts now: genesis, or the last record the latest purge removed."""
    try:
        return _anchor_of(_latest_purge())
    except (KeyError, TypeError, ValueError):
        raise ApplicationError(
            "the latest purge event does not state an anchor: the log does not verify"
        ) from None


def _anchor_break(event: InjectionRecord) -> Break | None:
    """The purge event is itself a record: it must hash right and state a purge the
    retention rules allow (nothing younger than the legal minimum removed)."""
    if record_hash(record_payload(event)) != event.record_hash:
        return Break(
            event.id, event.seq, "altered", "record_hash does not match the record's fields"
        )
    try:
        anchor = _anchor_of(event)
        last_removed = to_utc(event.request["through_created_at"])
    except (KeyError, TypeError, ValueError):
        return Break(event.id, event.seq, "anchor", "the purge event does not state an anchor")
    assert anchor.before is not None
    floor = event.created_at - timedelta(days=MINIMUM_RETENTION_DAYS)
    if anchor.seq >= event.seq or last_removed >= anchor.before or anchor.before > floor:
        return Break(
            event.id,
            event.seq,
            "anchor",
            f"the purge event is not a purge the retention rules allow (it claims records "
            f"through seq {anchor.seq}, created before {iso(anchor.before)}, at "
            f"{iso(event.created_at)})",
        )
    return None


# --- checkpoints the log is held to -----------------------------------------------------------


@dataclass(frozen=True)
class _Held:
    """A checkpoint as verification uses it."""

    source: str
    id: int | None
    label: str
    created_at: datetime
    seq: int
    hash: str
    head_created_at: str | None
    signature_ok: bool


def _held_file(path: Path | str) -> _Held:
    read = checkpoint_read(path)
    body = read.body
    return _Held(
        source="file",
        id=None,
        label=f"the checkpoint file {path} ({iso(body.created_at)})",
        created_at=body.created_at,
        seq=body.log.seq,
        hash=body.log.head,
        head_created_at=iso(body.log.head_created_at),
        signature_ok=True,
    )


def _held_stored(stored: AuditCheckpoint, key: str | None) -> _Held:
    """The stored checkpoint's own columns name it even when its body no longer matches. A row
    without an HMAC is vouched for by the witness alone."""
    log = stored.body.get("log") if isinstance(stored.body, dict) else None
    signed = (
        witnessed_checkpoint(stored.pk, stored.body)
        if not stored.mac
        else key is not None and checkpoint_mac_matches(stored.body, stored.mac, key)
    )
    return _Held(
        source="stored",
        id=stored.pk,
        label=f"checkpoint #{stored.pk} ({iso(stored.created_at)})",
        created_at=stored.created_at,
        seq=stored.log_seq,
        hash=stored.log_head,
        head_created_at=log.get("head_created_at") if isinstance(log, dict) else None,
        signature_ok=(
            signed
            and isinstance(log, dict)
            and (log.get("seq"), log.get("head")) == (stored.log_seq, stored.log_head)
        ),
    )


def _held_checkpoints(checkpoint: Path | str | None, warnings: list[str]) -> list[_Held]:
    """The file given (refused outright when its signature fails) and the latest stored one
    (reported as failed when its signature does)."""
    held = [_held_file(checkpoint)] if checkpoint is not None else []
    stored = AuditCheckpoint.objects.order_by("-id").first()
    if stored is not None:
        key = None
        if stored.mac:
            try:
                key = checkpoint_key()
            except ApplicationError as exc:
                warnings.append(f"stored checkpoints were not checked: {exc.message}")
                return held
        held.append(_held_stored(stored, key))
    return held


def _consistent(held: _Held, anchor: ChainAnchor) -> str:
    """Why the checkpointed head is no longer in the chain at its seq ("" when it is)."""
    seq, digest = held.seq, held.hash
    if seq > anchor.seq:
        found = InjectionRecord.objects.filter(seq=seq).values_list("record_hash", flat=True)
        hashes = set(found)
        if not hashes:
            return f"the log no longer holds seq {seq}"
        return "" if hashes == {digest} else f"the record at seq {seq} no longer has its hash"
    if seq == anchor.seq:
        return "" if digest == anchor.hash else f"the chain's anchor at seq {seq} differs"
    stamp = held.head_created_at
    if anchor.before is not None and stamp and to_utc(stamp) < anchor.before:
        return ""  # purged since, lawfully: the record was older than the purge's cutoff
    return (
        f"seq {seq} is gone, and the latest purge could not have removed it (it was created "
        f"at {stamp}, not before the purge's cutoff)"
    )


def _consistent_note(held: _Held, anchor: ChainAnchor) -> str:
    if held.seq < anchor.seq:
        return "its head was purged since, lawfully (older than the purge's cutoff)"
    return "prefix consistent: the checkpointed head is in the chain"


def _checkpoint_checks(
    held: list[_Held], anchor: ChainAnchor
) -> tuple[list[CheckpointCheck], list[Pin], Break | None]:
    checks, pins, broken = [], [], None
    for item in held:
        reason = (
            ""
            if item.signature_ok
            else ("its HMAC does not match its body (altered, or signed with another key)")
        )
        if item.signature_ok:
            reason = _consistent(item, anchor)
            if item.seq > anchor.seq:
                pins.append(Pin(item.seq, item.hash, item.label))
            elif reason and broken is None:
                broken = Break(None, item.seq, "checkpoint", f"{item.label}: {reason}")
        checks.append(
            CheckpointCheck(
                source=item.source,  # type: ignore[arg-type]
                id=item.id,
                created_at=item.created_at,
                seq=item.seq,
                hash=item.hash,
                signature_ok=item.signature_ok,
                consistent=item.signature_ok and not reason,
                reason=reason or _consistent_note(item, anchor),
            )
        )
    return checks, pins, broken


# --- the walk over the records ----------------------------------------------------------------


def _altered_texts(after: int | None = None) -> set[str]:
    """Stored texts that no longer match the SHA-256 they are kept under (each hashed once):
    all of them, or those the records after seq ``after`` delivered."""
    rows = DeliveredText.objects.values_list("sha256", "text").order_by()
    if after is not None:
        delivered = InjectionRecord.objects.filter(seq__gt=after).values("prompt_sha256")
        rows = rows.filter(sha256__in=delivered)
    return {digest for digest, text in rows.iterator(chunk_size=500) if sha256_text(text) != digest}


def _links(after: int | None = None) -> Iterator[Link]:
    """The records in seq order (those after seq ``after`` when given), with their text's
    problem."""
    altered = _altered_texts(after)
    rows = InjectionRecord.objects.order_by("seq", "id").annotate(
        stored=Exists(DeliveredText.objects.filter(sha256=OuterRef("prompt_sha256"))),
        erased=Exists(ErasedText.objects.filter(sha256=OuterRef("prompt_sha256"))),
    )
    if after is not None:
        rows = rows.filter(seq__gt=after)
    for record in rows.iterator(chunk_size=2000):
        problem = ""
        if record.prompt_sha256 in altered:
            problem = TEXT_ALTERED
        elif record.prompt_sha256 != EMPTY_TEXT_SHA256 and not (record.stored or record.erased):
            problem = TEXT_MISSING
        yield _link(record, problem)


def _link(record: InjectionRecord, text_problem: str = "") -> Link:
    return Link(
        id=record.pk,
        seq=record.seq,
        prev_hash=record.prev_hash,
        record_hash=record.record_hash,
        payload=record_payload(record),
        text_problem=text_problem,
    )


def _misplaced(prev_hash: str, not_id: int) -> Link | None:
    """A record that links to ``prev_hash`` wherever its seq now puts it."""
    found = InjectionRecord.objects.filter(prev_hash=prev_hash).exclude(pk=not_id)
    record = found.order_by("seq").first()
    return _link(record) if record is not None else None


def _missing_triggers() -> list[str]:
    suffixes = _TRIGGERS.get(connection.vendor)
    if suffixes is None:
        return []
    tables = [model._meta.db_table for model in _APPEND_ONLY_TABLES]
    wanted = {table + suffix for table in tables for suffix in suffixes}
    wanted |= set(_GRAPH_TRIGGERS[connection.vendor])
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        present = {row[0] for row in cursor.fetchall()}
    return sorted(wanted - present)


def _broken(found: Break | None) -> BrokenRecord | None:
    if found is None:
        return None
    return BrokenRecord(id=found.id, seq=found.seq, kind=found.kind, reason=found.reason)  # type: ignore[arg-type]


@dataclass
class _Setting:
    """What every verification starts from: the head, the anchor (and whether its purge event
    holds), the checkpoints checked and the pins they give."""

    warnings: list[str]
    head: ChainPoint | None
    anchor: ChainAnchor
    broken: Break | None
    checks: list[CheckpointCheck]
    pins: list[Pin]
    checkpoint_break: Break | None
    witness: WitnessCheck
    triggers_missing: bool

    @property
    def head_pin(self) -> Pin | None:
        head = self.head
        return Pin(head.seq, head.hash, "the head", "head") if head is not None else None

    def result(self, checked: int, broken: Break | None) -> ChainVerification:
        # Fails closed: a log nobody outside the database vouches for, or whose append-only
        # triggers were dropped, is not verified even when its hashes agree.
        return ChainVerification(
            ok=broken is None
            and all(check.signature_ok for check in self.checks)
            and self.witness.state == "verified"
            and not self.triggers_missing,
            checked=checked,
            first_broken=_broken(broken),
            head=self.head,
            anchor=self.anchor,
            checkpoints=self.checks,
            warnings=self.warnings,
            witness=self.witness,
        )


def _setting(checkpoint: Path | str | None) -> _Setting:
    warnings: list[str] = []
    held = _held_checkpoints(checkpoint, warnings)
    missing = _missing_triggers()
    if missing:
        warnings.append(f"append-only triggers are missing: {', '.join(missing)}")
    head_row = InjectionLogHead.objects.filter(pk=1).first()
    head = ChainPoint(seq=head_row.seq, hash=head_row.last_hash) if head_row else None
    event = _latest_purge()
    broken = _anchor_break(event) if event is not None else None
    try:
        anchor = _anchor_of(event)
    except (KeyError, TypeError, ValueError):  # named by _anchor_break
        anchor = ChainAnchor(kind="genesis", seq=0, hash=GENESIS_HASH)
    checks, pins, checkpoint_break = _checkpoint_checks(held, anchor)
    witnessed = log_witness_check(head, anchor)
    return _Setting(
        warnings, head, anchor, broken, checks, pins, checkpoint_break, witnessed, bool(missing)
    )


def _start_label(anchor: ChainAnchor) -> str:
    return "genesis" if anchor.kind == "genesis" else f"the purge anchor at seq {anchor.seq}"


def injection_log_verify(checkpoint: Path | str | None = None) -> ChainVerification:
    """Recomputes every record's hash in seq order from the chain's anchor (genesis, or the
    latest purge's) and holds the chain to the head and to checkpoints (the file given, and
    the latest stored one): names the first record that breaks it. A checkpoint file whose
    signature fails is refused (ApplicationError)."""
    setting = _setting(checkpoint)
    anchor, broken, checked = setting.anchor, setting.broken, 0
    if broken is None:
        checked, broken = chain_walk(
            _links(),
            start=(anchor.seq, anchor.hash),
            start_label=_start_label(anchor),
            head=setting.head_pin,
            pins=setting.pins,
            misplaced=_misplaced,
        )
        broken = broken or setting.checkpoint_break
    return setting.result(checked, broken)


#: Records the recent verification reads at most when no checkpoint covers the rest.
RECENT_WINDOW = 2000


@dataclass(frozen=True)
class RecentVerification:
    """A verification of the newest part of the log: ``scope`` says which part. "full": from
    the anchor to the end; "checkpoint": from the latest stored checkpoint's seq (its
    signature checked, the record there still holding its hash) to the end; "window": only
    the newest ``RECENT_WINDOW`` records (no usable checkpoint, or too many records since it).
    ``first_seq``..``last_seq`` is the range walked (``first_seq`` > ``last_seq`` when there
    was nothing to walk)."""

    scope: str
    first_seq: int
    last_seq: int
    verification: ChainVerification

    @property
    def unverified(self) -> int:
        """How many seqs before ``first_seq`` (after the anchor) this check did not walk."""
        anchor = self.verification.anchor
        return max(0, self.first_seq - 1 - (anchor.seq if anchor is not None else 0))


def _recent_start(setting: _Setting, last_seq: int, window: int) -> tuple[str, int]:
    """The scope and the first seq to walk."""
    stored = [c for c in setting.checks if c.source == "stored"]
    usable = [c for c in stored if c.signature_ok and c.seq > setting.anchor.seq]
    scope, first = "full", setting.anchor.seq + 1
    if usable:
        scope, first = "checkpoint", min(usable[0].seq, last_seq + 1)
    if last_seq - first + 1 > window:
        scope, first = "window", last_seq - window + 1
    return scope, first


def injection_log_verify_recent(*, window: int = RECENT_WINDOW) -> RecentVerification:
    """Verifies the newest part of the log in a bounded number of queries and rows: from the
    latest stored checkpoint (HMAC checked, the record at its seq still holding its hash) to
    the head, or the whole log when it is no longer than ``window`` records, or else only the
    newest ``window`` records (``scope`` says which). Each record walked is checked as
    ``injection_log_verify`` checks it (its hash, its link, its text, the head, the
    checkpoint at its seq); what lies before the first seq walked is not read."""
    setting = _setting(None)
    # One aggregate: the newest seq, and how many records the log holds after the anchor (the
    # records before the range walked are counted, not hashed).
    held = InjectionRecord.objects.filter(seq__gt=setting.anchor.seq).aggregate(
        newest=Max("seq"), count=Count("pk")
    )
    newest = held["newest"]
    last_seq = max(setting.head.seq if setting.head else 0, newest or 0)
    scope, first_seq = _recent_start(setting, last_seq, window)
    anchor, broken, checked = setting.anchor, setting.broken, 0
    if broken is None:
        start, label = (anchor.seq, anchor.hash), _start_label(anchor)
        if scope != "full":
            found = InjectionRecord.objects.filter(seq__gte=first_seq).order_by("seq", "id")
            prev_hash = found.values_list("prev_hash", flat=True).first()
            start, label = (first_seq - 1, prev_hash or ""), f"seq {first_seq - 1}"
        checked, broken = chain_walk(
            _links(after=None if scope == "full" else start[0]),
            start=start,
            start_label=label,
            head=setting.head_pin,
            pins=setting.pins,
            misplaced=_misplaced,
        )
        broken = broken or setting.checkpoint_break
    if broken is None and scope != "full":
        broken = _count_break(setting.anchor, last_seq, int(held["count"]))
    verification = setting.result(checked, broken)
    return RecentVerification(scope, first_seq, last_seq, verification)


def _count_break(anchor: ChainAnchor, last_seq: int, found: int) -> Break | None:
    """The records before the range walked are not hashed here, but they are counted: a
    record deleted or inserted there is seen at once, an edit only by the full verification."""
    expected = max(0, last_seq - anchor.seq)
    if found == expected:
        return None
    return Break(
        None,
        anchor.seq + 1,
        "gap" if found < expected else "inserted",
        f"the log holds {found} records after {_start_label(anchor)} where its seqs up to "
        f"{last_seq} need {expected}: records were deleted or inserted before the range checked",
    )
