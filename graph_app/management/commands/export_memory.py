"""Exports one project (graph, change log, sessions, traces, receipts) to a JSON Lines file
that ``import_memory`` loads into another database losslessly (``memoryproject.portability``
describes the format).

Exit status 2 on bad input (an unknown project, an unwritable file), with a message naming
the argument. A readable summary by default, one JSON object with --json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser

from memoryproject.errors import ApplicationError
from memoryproject.portability import project_export


def fail(command: BaseCommand, message: str, *, as_json: bool) -> NoReturn:
    """Says why a portability command refused (one JSON object with --json) and exits 2."""
    if as_json:
        command.stdout.write(json.dumps({"ok": False, "error": message}))
    else:
        name = type(command).__module__.rsplit(".", 1)[-1]
        command.stderr.write(f"{name}: {message}")
    raise SystemExit(2)


class Command(BaseCommand):
    help = "Export one project to a JSON Lines file that import_memory loads losslessly."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="the project's slug")
        parser.add_argument("--out", required=True, metavar="FILE", help="file to write")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"])
        if out.is_dir() or not out.parent.is_dir():
            fail(self, f"--out: cannot write {out}", as_json=options["json"])
        try:
            header = project_export(slug=options["project"], out=out)
        except ApplicationError as exc:
            fail(self, exc.message, as_json=options["json"])
        except OSError as exc:
            fail(self, f"--out: cannot write {out} ({exc.strerror})", as_json=options["json"])
        counts = {k: v for k, v in header["counts"].items()}
        if options["json"]:
            self.stdout.write(json.dumps({"ok": True, "out": str(out), **header}))
            return
        self.stdout.write(f"exported project '{header['project']['slug']}' to {out}")
        for table, count in counts.items():
            self.stdout.write(f"  {table:<16} {count}")
        self.stdout.write(f"  body sha256      {header['body_sha256']}")
