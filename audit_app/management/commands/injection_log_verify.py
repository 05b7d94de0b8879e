"""Recomputes the injection log's hash chain and names the first record that breaks it.

Exit status 1 when the chain is broken, so cron and monitoring notice.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit_app.selectors import injection_log_verify


class Command(BaseCommand):
    help = "Verify the injection log's hash chain (table by default, one JSON object with --json)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        result = injection_log_verify()
        broken = result.first_broken
        if options["json"]:
            self.stdout.write(json.dumps(result.as_json()))
        elif broken is None:
            self.stdout.write(f"injection log intact: {result.checked} records verified\n")
        else:
            self.stdout.write(
                f"injection log BROKEN at seq {broken.seq} (id {broken.id}): "
                f"{broken.reason}\n{result.checked} records before it verified\n"
            )
        if not result.ok:
            raise SystemExit(1)
