"""Retrieval quality of the context compiler on a generated engineering memory.

Loads the seeded corpus of ``benchmarks.retrieval.corpus`` into a temporary project through
the same services agents use (``fact_upsert``, ``episode_record``), compiles every question
under ``--budget`` tokens with ``context_compile`` (time-travel questions ``as_of`` their day)
and reads the citations back. Reports, per question kind and overall: recall (share of the gold
records cited), answered (share of questions with every gold record cited) and answered_whole
(share of questions with every gold record delivered as a whole line, neither a preview nor
cut); stale items cited (facts not valid at the question's instant: superseded, or scheduled
for later; must be 0), budget compliance, compile p50, tokens delivered (tokens_mean,
tokens_p50: cl100k) and previews per question (previews_mean). The project is deleted at the
end.

    manage.py memory_eval [--json] [--seed N] [--services N] [--budget 800]
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.retrieval.evaluate import report_lines, run_eval
from memoryproject.command_output import int_option, json_flag_add


class Command(BaseCommand):
    help = "Recall per question kind of context_compile on a generated engineering memory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--services", type=int, default=12, help="entities (3..16)")
        parser.add_argument("--budget", type=int, default=800, help="max_tokens per compile")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        services = int_option(options, "services", 3, 16)
        budget = int_option(options, "budget", 64, 32_000)
        report = run_eval(seed=options["seed"], services=services, budget=budget)
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        for line in report_lines(report):
            self.stdout.write(line)
