"""Backs up the SQLite database while the service runs: one consistent copy, checked, written
under a temporary name and renamed into place (``orchestration.backup``). PostgreSQL is refused
with how to back it up instead.

Exit status 2 on bad input or a refusal, with a message naming the argument. A readable table by
default, one JSON object with --json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memoryproject.command_output import BAD_INPUT, answered, json_flag_add, table
from orchestration.backup import BackupResult, database_backup


class Command(BaseCommand):
    help = (
        "Copy the SQLite database to FILE from one consistent snapshot while the service runs, "
        "check the copy and rename it into place (table by default, one JSON object with --json)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", required=True, metavar="FILE", help="the backup file")
        parser.add_argument("--force", action="store_true", help="replace FILE if it exists")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        answered(
            self,
            lambda: database_backup(out=Path(options["out"]), force=options["force"]),
            _render,
            as_json=options["json"],
            status=BAD_INPUT,
        )


def _render(result: BackupResult) -> str:
    rows = [
        ("file", result.path),
        ("size", f"{result.bytes:,} bytes ({result.pages:,} pages)"),
        ("took", f"{result.elapsed_ms:,.1f} ms"),
        ("integrity check", result.integrity_check),
        ("receipts", f"{result.receipts:,} (log head seq {result.log_head_seq})"),
        ("log head hash", result.log_head_hash),
    ]
    rows += [(f"graph {slug}", f"revision {rev}") for slug, rev in result.graph_revisions.items()]
    return f"backup written: {result.path}\n" + table(rows)
