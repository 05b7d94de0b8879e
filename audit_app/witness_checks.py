"""The injection log held to the witness: what a database writer cannot undo unnoticed.

The witness (memoryproject.witness) holds, outside the database, the log's head after every
receipt's commit, checkpoints (cron, ``audit_checkpoint``, and after every maintenance action)
and the maintenance grants. The log must still hold what it witnessed:

- the record at the newest witnessed seq, with its witnessed hash (the chain's hashes commit to
  every record before it, so one point covers the prefix), unless a witnessed purge removed it;
- a head not behind it (a log cut short, head moved back, is named);
- every checkpoint row the witness recorded, with the body it signed;
- no maintenance grant the witness did not sign (a gate opened by SQL);
- the chain's anchor, when a purge moved it, as a witnessed checkpoint after that purge states.

Each problem names what and since which witnessed point.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from audit_app.contracts import ChainAnchor, ChainPoint
from audit_app.models import AuditCheckpoint, AuditMaintenanceGrant, InjectionRecord
from memoryproject.contracts import WitnessCheck
from memoryproject.domain.canonical import canonical_json
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import to_utc
from memoryproject.witness import LOG_STREAM, WitnessRead, witness


def body_sha256(body: Any) -> str:
    """How the witness names a checkpoint row's body: the SHA-256 of its RFC 8785 JSON."""
    return hashlib.sha256(canonical_json(body)).hexdigest()


@dataclass(frozen=True)
class _Point:
    seq: int
    hash: str
    head_created_at: str | None
    label: str
    at: str


def _points(read: WitnessRead) -> list[_Point]:
    points = []
    for entry in read.of_kind("checkpoint"):
        log = entry.body.get("log") or {}
        points.append(
            _Point(
                int(log.get("seq", 0)),
                str(log.get("head", "")),
                log.get("head_created_at"),
                f"witness checkpoint {entry.n} ({entry.at})",
                entry.at,
            )
        )
    head = read.heads.get(LOG_STREAM)
    if head is not None:
        points.append(
            _Point(
                head.seq,
                head.hash,
                head.body.get("created_at"),
                f"the witnessed head ({head.at})",
                head.at,
            )
        )
    return points


def _point_problem(point: _Point, head: ChainPoint | None, anchor: ChainAnchor) -> str:
    since = f"since {point.label}"
    if point.seq > anchor.seq:
        hashes = set(
            InjectionRecord.objects.filter(seq=point.seq).values_list("record_hash", flat=True)
        )
        if not hashes:
            return (
                f"the log is shorter than witnessed: seq {point.seq} is gone ({since}; the "
                f"database's head says seq {head.seq if head else 0})"
            )
        if hashes != {point.hash}:
            return (
                f"the record at seq {point.seq} does not have the hash the witness holds: the log "
                f"was rewritten ({since})"
            )
        if head is None or head.seq < point.seq:
            return f"the head was moved back behind seq {point.seq} ({since})"
        return ""
    if point.seq == anchor.seq:
        return (
            "" if point.hash == anchor.hash else f"the anchor at seq {point.seq} differs ({since})"
        )
    stamp = point.head_created_at
    if anchor.before is not None and stamp and to_utc(stamp) < anchor.before:
        return ""  # purged since, lawfully (older than the purge's cutoff)
    return f"seq {point.seq} is gone and no lawful purge removed it ({since})"


def _anchor_problem(read: WitnessRead, anchor: ChainAnchor) -> str:
    if anchor.kind == "genesis":
        return ""
    # The purge's grant states the anchor it will leave; checkpoints after it state it too.
    for entry in read.entries:
        stated = entry.body.get("anchor") or {}
        if (stated.get("seq"), stated.get("hash")) == (anchor.seq, anchor.hash):
            return ""
    return (
        f"the chain's anchor (a purge through seq {anchor.seq}) was never witnessed: no "
        "purge grant or checkpoint states it"
    )


def _checkpoint_problems(read: WitnessRead) -> list[str]:
    witnessed = {}
    for entry in read.of_kind("checkpoint"):
        row = entry.body.get("checkpoint_id")
        if row is not None:
            witnessed[int(row)] = (entry, str(entry.body.get("checkpoint_sha256", "")))
    if not witnessed:
        return []
    rows = dict(AuditCheckpoint.objects.filter(pk__in=witnessed).values_list("pk", "body"))
    missing, altered = [], []
    for pk, (entry, digest) in sorted(witnessed.items()):
        if pk not in rows:
            missing.append((pk, entry))
        elif body_sha256(rows[pk]) != digest:
            altered.append((pk, entry))
    problems = []
    if missing:
        first = missing[0][1]
        names = ", ".join(f"#{pk}" for pk, _ in missing)
        problems.append(
            f"checkpoint rows are missing from the database: {names} (since witness checkpoint "
            f"{first.n}, {first.at})"
        )
    problems += [
        f"checkpoint row #{pk} no longer holds the body the witness signed ({entry.at})"
        for pk, entry in altered
    ]
    return problems


def _grant_problems(read: WitnessRead) -> list[str]:
    signed = {entry.n: entry.body for entry in read.of_kind("maintenance")}
    problems = []
    for pk, n, body, at in AuditMaintenanceGrant.objects.order_by("pk").values_list(
        "pk", "witness_n", "body", "created_at"
    ):
        if signed.get(int(n)) != body:
            problems.append(
                f"maintenance grant #{pk} ({at.isoformat()}) is not one the witness signed: the "
                "append-only tables were opened by SQL, not by the service"
            )
    return problems


def witnessed_checkpoint(pk: int, body: Any) -> bool:
    """Whether the witness signed checkpoint row ``pk`` with this body."""
    try:
        found = witness()
    except ApplicationError:
        return False
    if found is None:
        return False
    digest = body_sha256(body)
    return any(
        entry.body.get("checkpoint_id") == pk and entry.body.get("checkpoint_sha256") == digest
        for entry in found.read(streams=()).of_kind("checkpoint")
    )


def log_witness_check(head: ChainPoint | None, anchor: ChainAnchor) -> WitnessCheck:
    """The injection log held to the witness (see the module's outline)."""
    try:
        found = witness()
    except ApplicationError as exc:
        return WitnessCheck(state="failed", problems=[exc.message])
    if found is None:
        return WitnessCheck.unanchored("this record")
    read = found.read(streams=(LOG_STREAM,))
    problems = list(read.problems)
    points = _points(read)
    newest = max(points, key=lambda p: p.seq) if points else None
    if newest is not None:
        problem = _point_problem(newest, head, anchor)
        if problem:
            problems.append(problem)
    problem = _anchor_problem(read, anchor)
    if problem:
        problems.append(problem)
    problems += _checkpoint_problems(read)
    problems += _grant_problems(read)
    return WitnessCheck.held(
        problems,
        newest=(newest.seq, newest.at, newest.label) if newest else None,
        current=head.seq if head is not None else 0,
        key_id=read.key_id,
    )
