"""Reading the injection log: recomputing its hash chain."""

from __future__ import annotations

from typing import Any

from audit_app.domain.chain import record_hash, sha256_text
from audit_app.models import GENESIS_HASH, InjectionRecord
from audit_app.services import record_payload


def injection_log_verify() -> dict[str, Any]:
    """Recomputes every record's hash in seq order; names the first record that breaks."""
    expected_prev = GENESIS_HASH
    expected_seq = 1
    checked = 0
    for record in InjectionRecord.objects.order_by("seq").iterator(chunk_size=2000):
        reason = ""
        if record.seq != expected_seq:
            reason = f"seq {record.seq} follows {expected_seq - 1}: a record is missing"
        elif record.prev_hash != expected_prev:
            reason = "prev_hash does not match the previous record's hash"
        elif sha256_text(record.system_prompt) != record.prompt_sha256:
            reason = "system_prompt does not match prompt_sha256"
        elif record_hash(record_payload(record)) != record.record_hash:
            reason = "record_hash does not match the record's fields"
        if reason:
            return {
                "ok": False,
                "checked": checked,
                "first_broken": {"id": record.pk, "seq": record.seq, "reason": reason},
            }
        checked += 1
        expected_prev = record.record_hash
        expected_seq = record.seq + 1
    return {"ok": True, "checked": checked, "first_broken": None}
