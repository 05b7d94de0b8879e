"""`manage.py screening_eval`: screening measured on its corpus (benchmarks/screening): probes
stopped per family and language, benign text flagged, secrets masked per form, time per 2 KB
item. A table by default, one JSON object with --json."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.screening.evaluate import report_table, screening_evaluate


class Command(BaseCommand):
    help = (
        "Evaluate screening on its corpus: probes stopped per family, benign flagged, secrets "
        "masked per form, p50, p95 and max time per 2 KB item (uncached). --split tune|heldout|all (default heldout)."
    )
    # Pure computation on files of the repository: no database, no checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--split", choices=("tune", "heldout", "all"), default="heldout")
        parser.add_argument("--json", action="store_true", help="one JSON object")

    def handle(self, *args: object, **options: object) -> None:
        result = screening_evaluate(str(options["split"]))
        if options["json"]:
            self.stdout.write(json.dumps(result, ensure_ascii=False))
        else:
            self.stdout.write(report_table(result))
