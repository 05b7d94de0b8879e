"""Removes injection records older than a date once the retention period allows it
(``AUDIT_RETENTION_DAYS``, at least 183 days), with the texts only they delivered; records
the purge as an event of the chain, whose anchor (the seq and hash of the last record removed)
is where verification starts from then on.

Refuses (exit 1) a date inside the retention period and a log that does not verify. A
readable table by default, one JSON object with --json.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit_app.contracts import PurgeResult
from audit_app.retention import audit_log_purge
from memoryproject.command_output import answered, json_flag_add, table
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import TimestampError, to_utc


def parse_before(value: str) -> Any:
    """A date (midnight UTC) or an ISO-8601 timestamp with a timezone."""
    text = value.strip()
    if len(text) == 10:
        text += "T00:00:00Z"
    try:
        return to_utc(text)
    except TimestampError as exc:
        raise ApplicationError(f"--before: {exc}") from None


class Command(BaseCommand):
    help = (
        "Purge injection records created before --before (outside the retention period); "
        "--dry-run tells what would go."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--before", required=True, metavar="DATE", help="YYYY-MM-DD or ISO-8601 timestamp"
        )
        parser.add_argument("--dry-run", action="store_true", help="change nothing")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        answered(
            self,
            lambda: audit_log_purge(
                before=parse_before(options["before"]),
                dry_run=options["dry_run"],
                channel="cli",
                client="purge_audit_log",
            ),
            self._render,
            as_json=options["json"],
        )

    def _render(self, result: PurgeResult) -> str:
        if result.records == 0:
            return f"nothing to purge before {result['before']}\n"
        verb = "would purge" if result.dry_run else "purged"
        rows = [
            ("before", str(result["before"])),
            ("retention", f"{result.retention_days} days"),
            ("records", f"{result.records} (seq {result.from_seq}-{result.through_seq})"),
            ("texts", str(result.texts)),
        ]
        if result.anchor is not None:
            rows.append(("anchor", f"seq {result.anchor.seq} {result.anchor.hash}"))
        if result.event_seq is not None:
            rows.append(("event", f"seq {result.event_seq}"))
        return f"{verb} {result.records} record(s)\n" + table(rows)
