"""Exports one project (graph, change log, sessions, traces, receipts) to a JSON Lines file
that ``import_memory`` loads into another database losslessly (``orchestration.portability``
describes the format).

Exit status 2 on bad input (an unknown project, an unwritable file), with a message naming
the argument. A readable summary by default, one JSON object with --json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memoryproject.command_output import BAD_INPUT, json_flag_add, refuse
from memoryproject.errors import ApplicationError
from orchestration.portability import project_export


class Command(BaseCommand):
    help = "Export one project to a JSON Lines file that import_memory loads losslessly."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="the project's slug")
        parser.add_argument("--out", required=True, metavar="FILE", help="file to write")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"])
        if out.is_dir() or not out.parent.is_dir():
            refuse(self, f"--out: cannot write {out}", as_json=options["json"], status=BAD_INPUT)
        try:
            header = project_export(slug=options["project"], out=out)
        except ApplicationError as exc:
            refuse(self, exc.message, as_json=options["json"], status=BAD_INPUT)
        except OSError as exc:
            refuse(
                self,
                f"--out: cannot write {out} ({exc.strerror})",
                as_json=options["json"],
                status=BAD_INPUT,
            )
        counts = {k: v for k, v in header["counts"].items()}
        if options["json"]:
            self.stdout.write(json.dumps({"ok": True, "out": str(out), **header}))
            return
        self.stdout.write(f"exported project '{header['project']['slug']}' to {out}")
        for table, count in counts.items():
            self.stdout.write(f"  {table:<16} {count}")
        self.stdout.write(f"  body sha256      {header['body_sha256']}")
