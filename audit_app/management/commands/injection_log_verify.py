"""Verifies the injection log: every record's hash in seq order from the chain's anchor, held
to the head and to checkpoints (``--checkpoint FILE``, and the latest stored one); names the
first record that breaks it.

Exit status 1 when the chain is broken or a checkpoint is refused, so cron and monitoring
notice. A readable table by default, one JSON object with --json.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit_app.contracts import ChainVerification
from audit_app.selectors import injection_log_verify
from memoryproject.command_output import answered, json_flag_add, table


class Command(BaseCommand):
    help = (
        "Verify the injection log's hash chain against its head and checkpoints (table by "
        "default, one JSON object with --json); exit 1 when it does not verify."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--checkpoint",
            metavar="FILE",
            help="a checkpoint file (audit_checkpoint --out): the log must still hold its head",
        )
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        result = answered(
            self,
            lambda: injection_log_verify(checkpoint=options["checkpoint"]),
            self._render,
            as_json=options["json"],
        )
        if not result.ok:
            raise SystemExit(1)

    def _render(self, result: ChainVerification) -> str:
        broken = result.first_broken
        if broken is not None:
            named = f"id {broken.id}" if broken.id is not None else "missing"
            title = f"injection log BROKEN at seq {broken.seq} ({named}): {broken.reason}\n"
        elif result.ok:
            title = f"injection log intact: {result.checked} records verified\n"
        else:
            title = f"injection log NOT VERIFIED: {_why_not(result)}\n"
        rows = []
        if broken is not None:
            rows += [("kind", broken.kind), ("verified", f"{result.checked} records before it")]
        if result.anchor is not None:
            anchor = result.anchor
            where = "genesis" if anchor.kind == "genesis" else f"purge event seq {anchor.event_seq}"
            rows.append(("anchor", f"{where}: seq {anchor.seq} {anchor.hash[:16]}"))
        if result.head is not None:
            rows.append(("head", f"seq {result.head.seq} {result.head.hash[:16]}"))
        else:
            rows.append(("head", "none"))
        for check in result.checkpoints:
            name = "file" if check.source == "file" else f"#{check.id}"
            state = "ok" if check.consistent else "FAILED"
            rows.append(
                (
                    "checkpoint",
                    f"{name} {check['created_at']} seq {check.seq} {check.hash[:16]} "
                    f"{state}: {check.reason}",
                )
            )
        witnessed = result.witness
        if witnessed is not None:
            since = f", held to {witnessed.since}" if witnessed.since else ""
            rows.append(("witness", f"{witnessed.state}{since}"))
            rows += [("witness", problem) for problem in witnessed.problems]
        rows += [("warning", warning) for warning in result.warnings]
        return title + table(rows)


def _why_not(result: ChainVerification) -> str:
    """Why a log whose records all verify is still not verified."""
    witnessed = result.witness
    if witnessed is not None and witnessed.state == "unanchored":
        return "UNANCHORED: no witness is configured, nothing outside the database vouches for it"
    if witnessed is not None and witnessed.problems:
        return f"the witness disagrees: {witnessed.problems[0]}"
    if any(not check.signature_ok for check in result.checkpoints):
        return "a checkpoint is refused"
    return "; ".join(result.warnings) or "a checkpoint is refused"
