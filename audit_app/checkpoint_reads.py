"""Reads of checkpoints: a checkpoint file once its
signature (HMAC, or the witness's) is checked, and the latest stored checkpoint."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audit_app.contracts import CheckpointBody, CheckpointOut
from audit_app.models import AuditCheckpoint
from audit_app.witness_checks import witnessed_checkpoint
from memoryproject.checkpoint_key import checkpoint_key
from memoryproject.domain.hash_chain import checkpoint_mac_matches
from memoryproject.errors import ApplicationError


def checkpoint_view(
    pk: int | None,
    body: Mapping[str, Any],
    mac: str,
    *,
    file: str | None = None,
) -> CheckpointOut:
    return CheckpointOut(id=pk, body=CheckpointBody.model_validate(dict(body)), hmac=mac, file=file)


def _checkpoint_document(path: Path) -> tuple[dict[str, Any], str, int | None]:
    try:
        document = json.loads(path.expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise ApplicationError(f"checkpoint: cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise ApplicationError(f"checkpoint: {path} is not JSON") from None
    body, mac = (
        (document.get("body"), document.get("hmac")) if isinstance(document, dict) else ("", "")
    )
    if not isinstance(body, dict) or not isinstance(mac, str):
        raise ApplicationError(f"checkpoint: {path} is not a checkpoint (no body and hmac)")
    row = None
    if isinstance(document, dict) and isinstance(document.get("witness"), dict):
        # The row id the witness names it by (the file's body says which row it was).
        row = document.get("id") if isinstance(document.get("id"), int) else None
    return body, mac, row


def checkpoint_read(path: Path | str) -> CheckpointOut:
    """A checkpoint file, once its HMAC is checked: a file altered in any way (or signed with
    another key) is refused."""
    path = Path(path)
    body, mac, witnessed = _checkpoint_document(path)
    if not mac:
        if witnessed is None or not witnessed_checkpoint(witnessed, body):
            raise ApplicationError(
                f"checkpoint: {path} is refused: the witness holds no checkpoint with this body"
            )
    elif not checkpoint_mac_matches(body, mac, checkpoint_key()):
        raise ApplicationError(
            f"checkpoint: {path} is refused: its HMAC does not match its body (the file was "
            "altered, or signed with another AUDIT_CHECKPOINT_KEY)"
        )
    try:
        return checkpoint_view(None, body, mac, file=str(path))
    except ValueError:
        raise ApplicationError(f"checkpoint: {path} is signed but not a checkpoint body") from None


def checkpoint_latest() -> CheckpointOut | None:
    """The latest stored checkpoint, once its HMAC is checked (None when there is none)."""
    stored = AuditCheckpoint.objects.order_by("-id").first()
    if stored is None:
        return None
    if not stored.mac:
        # Vouched for by the witness alone: one it does not hold (or no witness to ask) is
        # no checkpoint to hold anything to; verification names it as failed.
        if not witnessed_checkpoint(stored.pk, stored.body):
            return None
    elif not checkpoint_mac_matches(stored.body, stored.mac, checkpoint_key()):
        raise ApplicationError(
            f"checkpoint #{stored.pk} is refused: its HMAC does not match its body (altered in "
            "the database, or signed with another AUDIT_CHECKPOINT_KEY)"
        )
    return checkpoint_view(stored.pk, stored.body, stored.mac)
