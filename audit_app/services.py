"""Appending to the injection log: the one function that writes injection records.

Callers invoke it inside their own ``transaction.atomic`` so the record commits with the
decision it receipts. The chain head row is locked with SELECT ... FOR UPDATE (PostgreSQL); on
SQLite the IMMEDIATE transaction mode already holds the database write lock from BEGIN, so
appends are serialised there too. ``seq`` and ``record_hash`` are unique as a last line of
defence.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from audit_app.domain.chain import record_hash, sha256_text
from audit_app.models import GENESIS_HASH, InjectionLogHead, InjectionRecord
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.timeutil import iso, utcnow

SOURCES = ("plan", "load")


def _head_locked() -> InjectionLogHead:
    head, _ = InjectionLogHead.objects.select_for_update().get_or_create(
        pk=1, defaults={"seq": 0, "last_hash": GENESIS_HASH}
    )
    return head


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
) -> InjectionRecord:
    """Appends one record to the chain and answers it."""
    if source not in SOURCES:
        raise ApplicationError(f"source: must be one of {', '.join(SOURCES)}", field="source")
    if not isinstance(channel, str) or not channel.strip():
        raise ApplicationError("channel: must be a non-empty string", field="channel")
    if generated_at.tzinfo is None:
        raise ApplicationError("generated_at: must be timezone-aware", field="generated_at")
    # Joins the caller's transaction (no savepoint: a failed append must fail the caller's
    # whole decision anyway); standalone calls get a transaction of their own.
    with transaction.atomic(savepoint=False):
        head = _head_locked()
        record = InjectionRecord(
            seq=head.seq + 1,
            project=project,
            source=source,
            channel=channel.strip()[:32],
            client=(client or "")[:200],
            status=status,
            decision=decision,
            trust_score=float(trust_score),
            threshold=float(threshold),
            mode=mode,
            trace_ids=[str(t) for t in trace_ids],
            system_prompt=system_prompt,
            prompt_sha256=sha256_text(system_prompt),
            generated_at=generated_at,
            created_at=utcnow(),
            prev_hash=head.last_hash,
        )
        record.record_hash = record_hash(record_payload(record))
        record.save(force_insert=True)
        head.seq = record.seq
        head.last_hash = record.record_hash
        head.save(update_fields=["seq", "last_hash"])
    return record


def record_payload(record: InjectionRecord) -> dict[str, object]:
    """The hashed fields of a record, as the chain hashes them."""
    return {
        "seq": record.seq,
        "project_id": record.project_id,
        "source": record.source,
        "channel": record.channel,
        "client": record.client,
        "status": record.status,
        "decision": record.decision,
        "trust_score": record.trust_score,
        "threshold": record.threshold,
        "mode": record.mode,
        "trace_ids": list(record.trace_ids),
        "prompt_sha256": record.prompt_sha256,
        "generated_at": iso(record.generated_at),
        "created_at": iso(record.created_at),
        "prev_hash": record.prev_hash,
    }
