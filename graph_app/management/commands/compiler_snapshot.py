"""`manage.py compiler_snapshot`: writes the compiler index snapshot of each project whose
snapshot is behind its graph.

    manage.py compiler_snapshot [--project SLUG ...] [--snapshot-dir DIR] [--min-rows N] [--json]

A server starts this itself once a refresh has read ``COMPILER_SNAPSHOT_MIN_ROWS`` rows since
the snapshot it restored (``graph_app.snapshot_writer``); run from cron it keeps the rows a new
process replays at start few whatever the threshold. Each project: its index loaded from its
snapshot and the rows changed since, then written anew unless it already describes the graph
(``current``) or another writer holds the project's lock (``busy``). ``--min-rows N``: only
once N rows were written since the snapshot (``recent`` until then); a server's own writer passes
``COMPILER_SNAPSHOT_MIN_ROWS``, so that when several servers cross it for the same rows, one
rewrite serves them all. Exit 1 when a snapshot due could not be written.
"""

from __future__ import annotations

import json
import resource
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from graph_app.index_cache import snapshot_now
from memoryproject.command_output import json_flag_add
from memoryproject.models import Project


class Command(BaseCommand):
    help = "Write the compiler index snapshot of each project whose snapshot is behind."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--project", action="append", default=[], help="a project's slug (default: every one)"
        )
        parser.add_argument(
            "--snapshot-dir",
            default=None,
            help="the snapshot directory (default: COMPILER_SNAPSHOT_DIR)",
        )
        parser.add_argument(
            "--min-rows",
            type=int,
            default=0,
            help="write a snapshot only once this many rows were written since it (default 0: "
            "whenever it is behind)",
        )
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["snapshot_dir"]:
            settings.COMPILER_SNAPSHOT_DIR = options["snapshot_dir"]
        slugs: list[str] = options["project"]
        if options["min_rows"] < 0:
            raise CommandError(f"--min-rows: must be 0 or more, got {options['min_rows']}")
        projects = list(Project.objects.order_by("pk"))
        if slugs:
            unknown = sorted(set(slugs) - {p.slug for p in projects})
            if unknown:
                raise CommandError(f"--project: no project '{unknown[0]}'")
            projects = [p for p in projects if p.slug in slugs]
        reports = []
        for project in projects:
            start = time.perf_counter()
            report = snapshot_now(project, min_rows=options["min_rows"])
            report["ms"] = round((time.perf_counter() - start) * 1000, 1)
            reports.append(report)
        peak_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        ok = all(r["status"] != "failed" for r in reports)
        if options["json"]:
            self.stdout.write(json.dumps({"ok": ok, "projects": reports, "peak_rss_mb": peak_mb}))
        else:
            self.stdout.write(_table(reports, peak_mb), ending="")
        if not ok:
            raise SystemExit(1)


def _table(reports: list[dict[str, Any]], peak_mb: float) -> str:
    lines = [f"{'project':<24} {'status':<8} {'revision':>9} {'snapshot':>9} {'rows':>7} {'ms':>9}"]
    for r in reports:
        lines.append(
            f"{r['project']:<24} {r['status']:<8} {r.get('revision', '-'):>9} "
            f"{r.get('snapshot', '-'):>9} {r.get('rows', '-'):>7} {r['ms']:>9}"
        )
    lines.append(f"peak memory of this process: {peak_mb} MB RSS")
    return "\n".join(lines) + "\n"
