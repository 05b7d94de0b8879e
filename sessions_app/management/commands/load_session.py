"""`manage.py load_session`: the latest trusted, fresh session summary, for hooks and scripts.

    manage.py load_session --project P [--threshold T] [--max-age-days D] [--format text|json]

It calls the same service as ``GET /v1/sessions/load`` and the MCP tool ``load_session``, and
a summary it returns is receipted in the injection log the same way, with channel "cli".

``--format text`` (the default) is made for a Claude Code SessionStart hook, whose stdout
becomes context: it prints the SESSION_CONTEXT block, or nothing when no summary passes (the
reason goes to stderr), and exits 0 either way, also when the project has no memory yet or the
database cannot be read, so a hook never stands in the way of a session. ``--format json``
prints the whole answer and exits 0 when a summary was found, 1 when none passed, 2 on an
error. Bad arguments exit 2 in both formats, naming the argument.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError

from memoryproject.contracts import Caller
from memoryproject.errors import ApplicationError, NotFoundError
from memoryproject.projects import project_resolve
from sessions_app.contracts import LoadInput, LoadResult
from sessions_app.session_memory import session_load


class Command(BaseCommand):
    help = "Print the latest trusted, fresh session summary: a SESSION_CONTEXT block, or JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--threshold", type=float, help="minimum trust 0..1 (default 0.45)")
        parser.add_argument(
            "--max-age-days", type=int, help="refuse older summaries (default SESSION_MAX_AGE_DAYS)"
        )
        parser.add_argument(
            "--format",
            choices=["text", "json"],
            default="text",
            help="text: the SESSION_CONTEXT block or nothing; json: the whole answer",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        text = options["format"] == "text"
        fields = {
            name: options[name]
            for name in ("threshold", "max_age_days")
            if options[name] is not None
        }
        try:
            # Parsed before the database is touched: a bad argument is always exit 2.
            params = LoadInput.parse(fields)
        except ApplicationError as exc:
            self._fail(exc.message)
        try:
            result = self._load(options["project"], params)
        except NotFoundError as exc:
            if not text:
                self._fail(exc.message)
            # A project that saved nothing yet has no memory: an empty context, not an error.
            self.stderr.write(f"load_session: {exc.message}")
            return
        except ApplicationError as exc:
            self._fail(exc.message)
        except DatabaseError as exc:
            message = f"the database could not be read: {exc}"
            if not text:
                self._fail(message)
            self.stderr.write(f"load_session: {message}")
            return
        if text:
            self._print_text(result)
            return
        self.stdout.write(json.dumps(result.as_json()))
        if not result.found:
            raise SystemExit(1)

    def _load(self, slug: str, params: LoadInput) -> LoadResult:
        project = project_resolve(slug=slug, api_key=None, access="read")
        caller = Caller(channel="cli", client="load_session")
        result: LoadResult = session_load(project=project, params=params, caller=caller)
        return result

    def _print_text(self, result: LoadResult) -> None:
        if result.found:
            self.stdout.write(result.system_prompt or "")
        else:
            self.stderr.write(f"load_session: no session context: {result.reason}")

    def _fail(self, message: str) -> NoReturn:
        self.stderr.write(f"load_session: {message}")
        raise SystemExit(2)
