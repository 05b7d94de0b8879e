"""`manage.py loadtest`: concurrent clients against the REST API's server on a database of its
own, then proof that nothing acknowledged was lost and that the injection log and the graph
verify.

Exit status 0 when everything holds, 1 on a lost write, a failed verification or any 5xx,
2 when the test could not run (database unreachable, a server that does not start).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.loadtest import LoadOptions, LoadReport, LoadTestError, loadtest_run, mix_parse
from benchmarks.loadtest.workload import DEFAULT_MIX
from memoryproject.command_output import BAD_INPUT, answer, json_flag_add, refuse


class Command(BaseCommand):
    help = (
        "Load test: start the REST API's server on a fresh database (memory_load on PostgreSQL "
        "by default), run concurrent clients of plan/save/trace/upsert/episode/compile over "
        "HTTP, print p50/p99 per endpoint, then check every acknowledged write and verify the "
        "injection log and the graph. Exit 1 when anything was lost, does not verify, or "
        "answered 5xx."
    )
    # The command never touches the configured database, so it needs no system checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--duration", type=float, default=60, help="seconds (default 60)")
        parser.add_argument("--clients", type=int, default=16, help="concurrent clients (16)")
        parser.add_argument(
            "--servers", type=int, default=1, help="server instances on one database (1)"
        )
        parser.add_argument(
            "--workers", type=int, default=0, help="workers per server (default: CPU count, >= 2)"
        )
        parser.add_argument("--threads", type=int, default=8, help="threads per worker (8)")
        parser.add_argument(
            "--database-url",
            default="",
            help=(
                "the database to load: its name must start with memory_load; it is dropped and "
                "created afresh (default LOADTEST_DATABASE_URL, else memory_load on the "
                "PostgreSQL server of DATABASE_URL or 127.0.0.1:5432); sqlite:///path works too"
            ),
        )
        parser.add_argument("--port", type=int, default=0, help="first server's port (free)")
        parser.add_argument(
            "--mix",
            default=",".join(f"{k}={v}" for k, v in DEFAULT_MIX.items()),
            help="request weights (default %(default)s)",
        )
        parser.add_argument(
            "--subjects",
            type=int,
            default=8,
            help="entities the writes share (8; fewer: more contention)",
        )
        parser.add_argument("--seed", type=int, default=0, help="random seed of the clients")
        parser.add_argument(
            "--drop", action="store_true", help="drop the database afterwards (kept by default)"
        )
        parser.add_argument("--log-dir", default="", help="where the servers' logs go (a temp dir)")
        json_flag_add(parser)
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = loadtest_run(self._options(options))
        except LoadTestError as exc:
            refuse(self, str(exc), as_json=options["json"], status=BAD_INPUT)
        answer(self, report, LoadReport.render, as_json=options["json"])
        if not report.ok:
            raise SystemExit(1)

    def _options(self, options: dict[str, Any]) -> LoadOptions:
        for name in ("clients", "servers", "subjects"):
            if options[name] < 1:
                raise LoadTestError(f"--{name}: must be at least 1")
        if options["duration"] <= 0:
            raise LoadTestError("--duration: must be positive")
        return LoadOptions(
            duration=options["duration"],
            clients=options["clients"],
            servers=options["servers"],
            workers=max(0, options["workers"]),
            threads=max(1, options["threads"]),
            database_url=options["database_url"],
            port=options["port"],
            mix=mix_parse(options["mix"]),
            subjects=options["subjects"],
            seed=options["seed"],
            progress=not options["no_progress"],
            keep_database=not options["drop"],
            log_dir=options["log_dir"],
        )
