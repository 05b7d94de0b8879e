"""Signs a checkpoint of the audit trail (the log's head, each project's graph chain head,
the time) with HMAC-SHA256, key ``AUDIT_CHECKPOINT_KEY`` from the environment; keeps it in the
checkpoint table and, with ``--out FILE``, writes it for cron to ship elsewhere.

Exit status 1 when it refuses (no key, or a log that does not verify). A readable table by
default, one JSON object with --json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.contracts import CheckpointOut
from memoryproject.command_output import answer, json_flag_add, refuse, table
from memoryproject.errors import ApplicationError


class Command(BaseCommand):
    help = "Sign a checkpoint of the injection log and graph heads (and write it with --out)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", metavar="FILE", help="also write the checkpoint here")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"]) if options["out"] else None
        try:
            checkpoint = audit_checkpoint_create(out=out)
        except (ApplicationError, OSError) as exc:
            message = exc.message if isinstance(exc, ApplicationError) else str(exc)
            refuse(self, message, as_json=options["json"])
        answer(self, checkpoint, self._render, as_json=options["json"])

    def _render(self, checkpoint: CheckpointOut) -> str:
        body = checkpoint.body
        rows = [
            ("created", str(checkpoint["body"]["created_at"])),
            ("log", f"seq {body.log.seq} head {body.log.head}"),
        ]
        for slug, head in body.graph.items():
            rows.append((f"graph {slug}", f"size {head.size} head {head.head}"))
        rows.append(("hmac", checkpoint.hmac))
        if checkpoint.file:
            rows.append(("file", checkpoint.file))
        return f"checkpoint #{checkpoint.id} signed\n" + table(rows)
