"""Checkpoints of the audit trail: what the log and every project's graph hold now, signed.

``audit_checkpoint_create`` (cron, ``manage.py audit_checkpoint``) keeps a checkpoint row in
the database (HMAC-signed when ``AUDIT_CHECKPOINT_KEY`` is set), appends the same statement to
the witness (Ed25519, outside the database: the row's id and body hash, the log's head, each
project's graph head, size and Merkle root, the chain's anchor) and can write a file to ship
elsewhere. ``witness_checkpoint`` appends only the witness entry: it runs after every
maintenance action (purge, erasure), so what maintenance left is witnessed at once.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from audit_app.checkpoint_reads import checkpoint_view
from audit_app.contracts import CheckpointOut
from audit_app.models import AuditCheckpoint, InjectionLogHead, InjectionRecord
from audit_app.selectors import chain_anchor, injection_log_verify
from audit_app.witness_checks import body_sha256
from graph_app.graph_head import graph_head
from graph_app.integrity import integrity_unwitnessed
from memoryproject.checkpoint_key import checkpoint_key
from memoryproject.domain.hash_chain import GENESIS_HASH, checkpoint_mac
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.timeutil import iso, utcnow
from memoryproject.witness import Witness, witness
from memoryproject.writes import write_transaction

log = logging.getLogger(__name__)


def _graph_heads() -> dict[str, dict[str, Any]]:
    """Each project's graph chain head: the size and last hash of its change log."""
    heads = {}
    for project in Project.objects.order_by("slug"):
        head = graph_head(project)
        heads[project.slug] = {"size": head.changes, "head": head.head_hash}
    return heads


def _graph_witnessed() -> dict[str, dict[str, Any]]:
    """Each project's graph as the witness records it: head, size and Merkle root."""
    graphs = {}
    for project in Project.objects.order_by("slug"):
        result = integrity_unwitnessed(project=project)
        graphs[project.slug] = {
            "pk": project.pk,
            "size": result.chain.size,
            "head": result.chain.head,
            "merkle_root": result.merkle_root,
        }
    return graphs


def _log_state() -> dict[str, Any]:
    head = InjectionLogHead.objects.filter(pk=1).first()
    seq, last_hash = (head.seq, head.last_hash) if head else (0, GENESIS_HASH)
    last = InjectionRecord.objects.filter(seq=seq).values_list("created_at", flat=True)
    return {"seq": seq, "head": last_hash, "head_created_at": iso(last.first())}


def _anchor() -> dict[str, Any]:
    anchor = chain_anchor()
    return {"kind": anchor.kind, "seq": anchor.seq, "hash": anchor.hash}


def _refuse_damage() -> None:
    verification = injection_log_verify()
    if not verification.ok:
        broken = verification.first_broken
        where = f" at seq {broken.seq}: {broken.reason}" if broken else ""
        witnessed = verification.witness
        if not where and witnessed is not None and witnessed.problems:
            where = f": {witnessed.problems[0]}"
        raise ApplicationError(
            f"the injection log does not verify{where}; a checkpoint would sign the damage, so "
            "none was made"
        )


def _signing_witness() -> Witness | None:
    found = witness()
    if found is not None and found.signer is None:
        raise ApplicationError(
            "WITNESS_KEY_FILE: this host holds only the witness's public key; checkpoints are "
            "signed where the private key is"
        )
    return found


def witness_checkpoint(*, reason: str) -> None:
    """Appends a checkpoint of what the database holds now to the witness (after maintenance:
    ``reason`` names it). Logged, never raised: the maintenance it follows is committed."""
    try:
        found = _signing_witness()
        if found is None:
            return
        _refuse_damage()
        found.append(
            "checkpoint",
            {
                "reason": reason,
                "log": _log_state(),
                "anchor": _anchor(),
                "graph": _graph_witnessed(),
            },
        )
    except Exception:
        log.exception("witness: no checkpoint after %s", reason)


def _write_checkpoint_file(out: Path, document: Mapping[str, Any]) -> None:
    """Written whole or not at all (a cron job ships the file elsewhere)."""
    out = out.expanduser()
    handle, temporary = tempfile.mkstemp(dir=out.parent or Path("."), prefix=".checkpoint-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=2, sort_keys=True)
            stream.write("\n")
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def audit_checkpoint_create(*, out: Path | None = None) -> CheckpointOut:
    """Signs the log's head (seq, hash, the head record's time) and each project's graph chain
    head: a checkpoint row (HMAC-SHA256 when ``AUDIT_CHECKPOINT_KEY`` is set) and the witness
    entry that vouches for it from outside the database; with ``out``, a JSON file to ship
    elsewhere. Refuses to sign a log that does not verify, or with neither key."""
    hmac_key = str(getattr(settings, "AUDIT_CHECKPOINT_KEY", "") or "")
    found = _signing_witness()
    if found is None and not hmac_key:
        raise ApplicationError(
            "no checkpoint key: configure the witness (WITNESS_DIR, WITNESS_KEY_FILE) or set "
            "AUDIT_CHECKPOINT_KEY"
        )
    if hmac_key:
        hmac_key = checkpoint_key()  # refuses a short key
    # Read before the write turn (each project in its own snapshot): a full verification of
    # a large graph must not hold the database's write lock.
    graphs = _graph_witnessed() if found is not None else {}
    with write_transaction():
        _refuse_damage()
        now = utcnow()
        log_state = _log_state()
        body: dict[str, Any] = {
            "version": 1,
            "created_at": iso(now),
            "log": log_state,
            "graph": _graph_heads(),
        }
        mac = checkpoint_mac(body, hmac_key) if hmac_key else ""
        stored = AuditCheckpoint.objects.create(
            created_at=now,
            log_seq=int(log_state["seq"]),
            log_head=str(log_state["head"]),
            body=body,
            mac=mac,
        )
        witnessed = None
        if found is not None:
            # Last in the transaction: a witnessed row that then failed to commit would read
            # as a deleted checkpoint.
            entry = found.append(
                "checkpoint",
                {
                    "reason": "checkpoint",
                    "checkpoint_id": stored.pk,
                    "checkpoint_sha256": body_sha256(body),
                    "log": log_state,
                    "anchor": _anchor(),
                    "graph": graphs,
                },
            )
            witnessed = {"n": entry.n, "key": found.key_id}
    if out is not None:
        document: dict[str, Any] = {"id": stored.pk, "body": body, "hmac": mac}
        if witnessed is not None:
            document["witness"] = witnessed
        _write_checkpoint_file(out, document)
    return checkpoint_view(stored.pk, body, mac, file=str(out) if out is not None else None)
