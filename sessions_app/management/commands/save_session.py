"""`manage.py save_session`: trust-scores and stores a session summary, for hooks and scripts.

    manage.py save_session --project P (--file F | -) [--json]

The summary is read from a file or, with ``-``, from stdin (UTF-8). It goes through the same
service as ``POST /v1/sessions/save`` and the MCP tool ``save_session``, with the same rules and
errors. Exit 0 when saved; 2 on an error (no such file, empty or too long summary, bad project),
with a message naming the argument.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser

from memoryproject.command_output import json_flag_add
from memoryproject.contracts import Caller
from memoryproject.errors import ApplicationError
from memoryproject.projects import project_resolve
from sessions_app.contracts import SaveResult
from sessions_app.session_memory import session_save


class Command(BaseCommand):
    help = "Trust-score and store a session summary read from --file F or from stdin (-)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--project",
            required=True,
            help="project slug (it must exist: manage.py create_project)",
        )
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--file", help="read the summary from this file")
        source.add_argument(
            "stdin", nargs="?", choices=["-"], metavar="-", help="read the summary from stdin"
        )
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        summary = self._read(options["file"])
        try:
            project = project_resolve(slug=options["project"], api_key=None, access="write")
            result: SaveResult = session_save(
                project=project,
                summary=summary,
                caller=Caller(channel="cli", client="save_session"),
            )
        except ApplicationError as exc:
            self._fail(exc.message)
        if options["json"]:
            self.stdout.write(json.dumps(result.as_json()))
            return
        self._print(result)

    def _read(self, file: str | None) -> str:
        try:
            if file is None or file == "-":
                return sys.stdin.read()
            return Path(file).read_text(encoding="utf-8")
        except FileNotFoundError:
            self._fail(f"--file: no such file: {file}")
        except IsADirectoryError:
            self._fail(f"--file: is a directory: {file}")
        except UnicodeDecodeError:
            self._fail(f"--file: not UTF-8 text: {file or 'stdin'}")
        except OSError as exc:
            self._fail(f"--file: cannot read {file}: {exc.strerror}")

    def _print(self, result: SaveResult) -> None:
        elements = result.signals.get("elements") or {}
        missing = [
            name
            for name, finding in elements.items()
            if isinstance(finding, dict) and finding.get("evidence") == "missing"
        ]
        self.stdout.write(f"saved       trace {result.trace_id} (project {result.project})")
        self.stdout.write(
            f"trust       {result.trust_score:.4f} (risk {result.risk:.4f}, {result.decision})"
        )
        self.stdout.write(f"tokens      {result.tokens}")
        self.stdout.write(f"missing     {', '.join(missing) or 'nothing'}")

    def _fail(self, message: str) -> NoReturn:
        self.stderr.write(f"save_session: {message}")
        raise SystemExit(2)
