"""Runs the contradiction auditor from cron: every project, or one.

Exit status: 0 when no finding is open, 1 when findings remain open (for a person, in the
admin), 2 on an error (bad arguments, unknown project). A readable summary by default, one
JSON object with --json.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit_app.contracts import ContradictionAuditResult
from audit_app.findings import contradictions_audit
from memoryproject.command_output import json_flag_add
from memoryproject.contracts import Caller
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.projects import project_resolve


class Command(BaseCommand):
    help = "Check facts for contradictions; exit 0 clean, 1 findings open, 2 error."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="project slug (default: every project)")
        parser.add_argument("--as-of", dest="as_of", help="ISO-8601 time (default now)")
        parser.add_argument(
            "--auto-resolve",
            action="store_true",
            help="retire the older side of each resolvable conflict into history",
        )
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            results = self._audit(options)
        except ApplicationError as exc:
            self.stderr.write(f"audit_contradictions: {exc.message}")
            raise SystemExit(2) from exc
        open_total = sum(r.open for r in results)
        if options["json"]:
            body = {
                "open": open_total,
                "auto_resolved": sum(r.auto_resolved for r in results),
                "runs": [r.as_json() for r in results],
            }
            self.stdout.write(json.dumps(body))
        else:
            self._print(results, open_total)
        if open_total:
            raise SystemExit(1)

    def _audit(self, options: dict[str, Any]) -> list[ContradictionAuditResult]:
        if options["project"]:
            projects = [project_resolve(slug=options["project"], api_key=None, access="read")]
        else:
            projects = list(Project.objects.order_by("slug"))
        caller = Caller(channel="cli", client="audit_contradictions")
        fields: dict[str, Any] = {"auto_resolve": options["auto_resolve"]}
        if options["as_of"]:
            fields["as_of"] = options["as_of"]
        return [
            contradictions_audit(project=project, caller=caller, **fields) for project in projects
        ]

    def _print(self, results: list[ContradictionAuditResult], open_total: int) -> None:
        self.stdout.write(f"{'project':<24} {'facts':>8} {'open':>6} {'auto-resolved':>14}")
        for r in results:
            self.stdout.write(
                f"{r.project:<24} {r.facts_checked:>8} {r.open:>6} {r.auto_resolved:>14}"
            )
        for r in results:
            for f in r.findings:
                self.stdout.write(f"\n#{f.id} [{f.state}] {r.project}: {f.rule} on {f.subject}")
                self.stdout.write(f"  {f.evidence}\n  suggestion: {f.suggestion}")
        verdict = "no open contradictions" if not open_total else f"{open_total} finding(s) open"
        self.stdout.write(f"\n{verdict}")
