"""Imports a file written by ``export_memory`` into this database, in one transaction that
verifies the graph's integrity and the injection log before it commits.

``--project NEW`` names the project differently; it is refused for a project whose graph is
sealed (graph hashes cover the slug). Receipts keep their hashes only in an empty injection
log; ``--skip-receipts`` imports everything else when they cannot (see the README, *Export and
import*). The file is not trusted: over ``IMPORT_MAX_BYTES``, a row breaking its kind's rules or
a row naming anything outside the imported project refuses it, in one line naming the file's
line. Exit status 2 on bad input or a refused import, 0 when imported and verified.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DataError, IntegrityError

from memoryproject.command_output import BAD_INPUT, answer, input_file, json_flag_add, refuse
from memoryproject.errors import ApplicationError
from orchestration.portability import ImportResult, project_import


class Command(BaseCommand):
    help = "Import a project exported by export_memory (verified before it commits)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="an export_memory file")
        parser.add_argument("--project", metavar="NEW", help="import under this slug")
        parser.add_argument(
            "--skip-receipts",
            action="store_true",
            help="leave the receipts out when the injection log here cannot take them",
        )
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        path = input_file(self, options["file"], label="FILE", as_json=as_json)
        try:
            result = project_import(
                path=path, project_slug=options["project"], skip_receipts=options["skip_receipts"]
            )
        except ApplicationError as exc:
            refuse(self, exc.message, as_json=as_json, status=BAD_INPUT)
        except (IntegrityError, DataError) as exc:
            # What the checks before the insert do not foresee (a constraint between rows, such
            # as two entities of one slug): the transaction is rolled back.
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            refuse(
                self,
                f"FILE: a row breaks a rule of this database ({reason}); nothing was written",
                as_json=as_json,
                status=BAD_INPUT,
            )
        answer(self, result, _render, as_json=as_json)
        if not as_json:
            for warning in result.warnings:
                self.stderr.write(f"warning: {warning}")


def _render(result: ImportResult) -> str:
    counts = "".join(f"  {table:<16} {count}\n" for table, count in result.counts.items())
    return (
        f"imported project '{result.project}' (receipts: {result.receipts})\n{counts}"
        "  graph integrity  verified\n"
        "  injection log    verified\n"
    )
