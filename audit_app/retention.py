"""The retention purge of the injection log (``audit_log_purge``): the oldest records, outside
the retention period, and the texts only they delivered are removed, and a purge event anchors
what remains."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Any, cast

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef

from audit_app.checkpoints import witness_checkpoint
from audit_app.contracts import ChainPoint, PurgeResult
from audit_app.injection_log import audit_event_append, injection_log_head_locked
from audit_app.models import DeliveredText, InjectionRecord, audit_maintenance
from audit_app.selectors import chain_anchor, injection_log_verify
from memoryproject.errors import ApplicationError, validation_error
from memoryproject.timeutil import iso, utcnow
from memoryproject.writes import write_transaction


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
        head = injection_log_head_locked()
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
