"""Latency and correctness figures of the knowledge graph and the context compiler, beside a
plain in-memory reference over the same corpus (``benchmarks/memory/``).

Generates a synthetic engineering memory with a fixed seed into a project of the configured
database, measures the operations (writes through the real services on a sample on top of it),
compiles every query with ours and with the reference in turn, then deletes the project unless
``--keep`` (a kept corpus is found again by the next run with ``--keep``: 100,000 facts take
minutes to load). ``--scales`` sweeps several sizes, each with a cold start in a new process,
and writes a log-log chart.

    manage.py memory_benchmark --scale small|cortex|100k [--json] [--seed N] [--keep] [--cold]
        [--profile-stages]
    manage.py memory_benchmark --scales 1k,10k,100k [--plot FILE] [--keep] [--json]
    manage.py memory_benchmark --first-compile PROJECT [--repeat N] [--pause S] [--soak N]
        [--json]

Each form takes ``--under-load N``: the same with N more processes each spinning one core
(``benchmarks/under_load.py``).

``--first-compile`` times a new server process to its first compile over a stored project (a
kept corpus: ``bench-keep-100k-s7``), through each door as a client meets it: ``mcp_serve``
over stdio under the MCP SDK's client, and the REST API's server (``memoryproject.server``) over
HTTP (``benchmarks/memory/processes.py``). Each door's first run then answers ``--soak``
compiles of varied queries and budgets, and the memory of its processes is read again: a
server's caches fill as it serves, up to their bounds (graph_app.domain.working_set).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks.memory.coldstart import cold_start_run
from benchmarks.memory.processes import first_compile_lines, first_compiles
from benchmarks.memory.report import (
    SWEEP_DEFAULT,
    memory_benchmark,
    memory_sweep,
    report_lines,
    sweep_lines,
)
from benchmarks.memory.synthetic import SCALES, scale_parse
from benchmarks.under_load import (
    spinning,
    under_load_add,
    under_load_line,
    under_load_note,
    under_load_option,
)
from memoryproject.command_output import json_flag_add


def _sizes(text: str) -> list[int]:
    try:
        return [scale_parse(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise CommandError(f"--scales: {error}") from error


class Command(BaseCommand):
    help = "Benchmarks graph writes/reads and context compilation on a synthetic memory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--scale", choices=sorted(SCALES), default="cortex")
        parser.add_argument(
            "--scales",
            help="sweep these sizes in facts, e.g. 1k,10k,100k (each with a cold start)",
        )
        parser.add_argument(
            "--sweep", action="store_true", help=f"sweep the default sizes ({SWEEP_DEFAULT})"
        )
        parser.add_argument(
            "--plot",
            type=Path,
            default=None,
            help="where the sweep's log-log chart (SVG) goes (default data/benchmark/...)",
        )
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--keep", action="store_true", help="keep the corpus for the next run, or reuse it"
        )
        parser.add_argument(
            "--cold", action="store_true", help="also time a first compile in a new process"
        )
        parser.add_argument("--cold-start", metavar="PROJECT", help="(internal) the new process")
        parser.add_argument(
            "--first-compile",
            metavar="PROJECT",
            help="time new mcp_serve and REST API server processes to their first compile over "
            "PROJECT",
        )
        parser.add_argument("--repeat", type=int, default=3, help="--first-compile: runs per door")
        parser.add_argument(
            "--pause",
            type=float,
            default=0.0,
            help="--first-compile: also time an MCP first call made this many seconds after "
            "the handshake, as an agent's model reads the tools",
        )
        parser.add_argument(
            "--soak",
            type=int,
            default=2000,
            help="--first-compile: then this many compiles of varied queries and budgets through "
            "each door (its first run), and each process's memory after them: what a server "
            "holds once it has served a while (0: none)",
        )
        parser.add_argument(
            "--profile-stages",
            action="store_true",
            help="also time each query's delivered compile per stage (ranking, activation, "
            "packing, SQL reads, receipt write); with --keep, the kept corpus holds the receipts",
        )
        parser.add_argument("--query", default="what does it depend on")
        json_flag_add(parser)
        under_load_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["cold_start"]:
            self.stdout.write(json.dumps(cold_start_run(options["cold_start"], options["query"])))
            return
        busy = under_load_option(options)
        with spinning(busy):
            result, render = self._measure(options)
        under_load_note(result, busy)
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        for line in render(result):
            self.stdout.write(line)
        self.stdout.write(under_load_line(result))

    def _measure(
        self, options: dict[str, Any]
    ) -> tuple[dict[str, Any], Callable[[dict[str, Any]], list[str]]]:
        if options["first_compile"]:
            result = first_compiles(
                options["first_compile"],
                options["query"],
                repeat=options["repeat"],
                pause=options["pause"],
                soak=options["soak"],
            )
            render: Callable[[dict[str, Any]], list[str]] = first_compile_lines
        elif options["scales"] or options["sweep"]:
            sizes = _sizes(options["scales"] or SWEEP_DEFAULT)
            result = memory_sweep(
                sizes, seed=options["seed"], plot=options["plot"], keep=options["keep"]
            )
            render = sweep_lines
        else:
            if options["profile_stages"] and not options["keep"]:
                # Receipts are append-only and name the facts they delivered: a scratch
                # project holding them could not be deleted.
                raise CommandError("--profile-stages writes receipts: use it with --keep")
            result = memory_benchmark(
                options["scale"],
                seed=options["seed"],
                keep=options["keep"],
                cold_start=options["cold"],
                stages=options["profile_stages"],
            )
            render = report_lines
        return result, render
