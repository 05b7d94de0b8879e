"""Imports the traces of a CognOS session-memory database (``sessions_app.cognos_import``
says how its fields map). Reports what was imported, what was scored here and each row
skipped with its reason. Exit status 2 on bad input (no such file, not a CognOS database),
0 otherwise (skipped rows are reported, not fatal).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memoryproject.command_output import BAD_INPUT, input_file, json_flag_add, refuse
from memoryproject.errors import ApplicationError
from memoryproject.models import Project, slug_validator
from memoryproject.writes import write_transaction
from sessions_app.cognos_import import cognos_traces_import


class Command(BaseCommand):
    help = "Import the traces table of a CognOS session-memory database (SQLite) into a project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("db", metavar="DB.sqlite3", help="the CognOS trace database")
        parser.add_argument("--project", required=True, help="project to import into (created)")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        path = input_file(self, options["db"], label="DB", as_json=as_json)
        slug = options["project"]
        try:
            slug_validator(slug)
        except Exception:  # ValidationError: the slug rule, said once
            refuse(
                self,
                f"--project: {slug!r} is not a valid project slug",
                as_json=as_json,
                status=BAD_INPUT,
            )
        try:
            with write_transaction():  # a database that is not CognOS's creates nothing
                project, _ = Project.objects.get_or_create(slug=slug)
                result = cognos_traces_import(path=path, project=project)
        except ApplicationError as exc:
            refuse(self, exc.message, as_json=as_json, status=BAD_INPUT)
        if as_json:
            self.stdout.write(json.dumps(result.as_json()))
            return
        self.stdout.write(
            f"imported {result.imported} CognOS traces into '{result.project}' "
            f"({result.scored} scored here), skipped {len(result.skipped)}"
        )
        for skipped in result.skipped:
            self.stdout.write(f"  skipped {skipped['trace_id']}: {skipped['reason']}")
