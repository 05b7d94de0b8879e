"""Evidence recall of the context compiler on LoCoMo conversations (``benchmarks/locomo/``).

Every dialogue turn becomes one episode, each question of categories 1-4 is compiled as the
query under ``--budget`` tokens with the same ``context_compile`` that serves agents
(``--profile``, dialogue by default), and the cited episodes are read back to the turns'
``dia_id``s. Each conversation goes into its own temporary project, deleted at the end.

    manage.py locomo_eval --data ../shared/datasets/locomo --budget 800 [--conversations conv-26] [--profile code] [--json]
    manage.py locomo_eval --data ../shared/datasets/locomo --cross-validate [--objective citation]
    manage.py locomo_eval --data ../shared/datasets/locomo --reference [--json]
    manage.py locomo_eval --data ../shared/datasets/locomo --semantic [--reference]

``--reference`` runs, beside the compiler and on the same lines and budget, BM25, dense
all-MiniLM-L6-v2 and their reciprocal-rank fusion (``benchmarks/locomo/reference.py``); it needs
rank-bm25 and the semantic backend (``graph_app/domain/semantic.py``). It also times every
question end to end for the compiler and each reference, in the same run: bm25 right after the
compiler on each question, so that the host's load weighs on both, dense and hybrid after the
compiler's loop (the question encoded alone, as a caller would); it prints p50 and p95 and the
compiler's p50 (p95) over bm25's. ``--under-load N`` runs it all beside N more processes each
spinning one core (``benchmarks/under_load.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test.utils import override_settings

from benchmarks.locomo.recall import locomo_recall, recall_lines
from benchmarks.locomo.reference import reference_missing, reference_table
from benchmarks.locomo.tuning import OBJECTIVES, cross_validate
from benchmarks.under_load import (
    spinning,
    under_load_add,
    under_load_line,
    under_load_note,
    under_load_option,
)
from graph_app.domain import semantic
from graph_app.domain.profiles import PROFILES
from memoryproject.command_output import int_option, json_flag_add

JSON_KEYS = """--json: per conversation ("conversations") and "overall": questions, turns;
recall_all / recall_any (citation recall: every / at least one evidence turn cited, whole or
as a preview); full_all / full_any (full-evidence recall: every / at least one evidence turn's
whole text in the delivered markdown; a preview never counts); answer_contained (the
SQuAD-normalised gold answer found as whole words in the delivered markdown, over categories
1, 2 and 4); tokens_mean / tokens_p50 (cl100k tokens delivered); previews_mean (cited items
shown as a preview or cut, per question); evidence_preview_share (share of the cited evidence
turns that came only as a preview); mean_cited; compile_p50_ms. "categories": per question
category, questions, recall_all, full_all, answer_contained. Also "budget" and "profile".
"semantic": whether the semantic backend ranked (--semantic). With --reference: "references" (bm25, dense, hybrid: each "overall", "conversations" and
"categories" as above, compile_p50_ms timed end to end), "margin_vs_hybrid" (the compiler's
full_all and answer_contained minus the hybrid's) and "timing" (per question, end to end, over
every conversation: "ours", "bm25", "dense", "hybrid" each {"p50_ms", "p95_ms"} by nearest rank,
and "ratio_p50" / "ratio_p95": ours over bm25); with --cross-validate, "reference" holds the
hybrid's full_all and the cross-validated figure's margin over it."""


class Command(BaseCommand):
    help = (
        "Evidence recall of context_compile on LoCoMo conversations: citation recall, "
        "full-evidence recall (all / any), answer containment, tokens delivered and previews. "
        + JSON_KEYS
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--data", required=True, help="folder holding conv-*.json files")
        parser.add_argument("--budget", type=int, default=800, help="max_tokens per compile")
        parser.add_argument(
            "--conversations", default="", help="comma-separated names, e.g. conv-26,conv-30"
        )
        parser.add_argument(
            "--profile",
            choices=sorted(PROFILES),
            default="dialogue",
            help="query profile of every compile (default dialogue)",
        )
        json_flag_add(parser)
        under_load_add(parser)
        parser.add_argument(
            "--cross-validate",
            action="store_true",
            help="score the dialogue profile's constants over a grid and report the in-sample "
            "and the leave-one-conversation-out figures (always JSON)",
        )
        parser.add_argument(
            "--reference",
            action="store_true",
            help="also run BM25, dense MiniLM and their reciprocal-rank fusion on the same lines "
            "and budget, and report the compiler's margin over the fusion and its time per "
            "question (p50, p95) over BM25's, both timed end to end in the same run",
        )
        parser.add_argument(
            "--semantic",
            action="store_true",
            help="rank with the semantic backend on (MEMORY_SEMANTIC: sentence vectors fused "
            "with BM25), to measure the compiler with and without it",
        )
        parser.add_argument(
            "--objective",
            choices=OBJECTIVES,
            default="full",
            help="what --cross-validate maximises: full-evidence recall (all), the default, or "
            "citation recall (all)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["data"])
        if not folder.is_dir():
            raise CommandError(f"--data: '{folder}' is not a folder")
        wanted = [c.strip() for c in options["conversations"].split(",") if c.strip()]
        paths = (
            [folder / f"{c}.json" for c in wanted] if wanted else sorted(folder.glob("conv-*.json"))
        )
        missing = [str(p) for p in paths if not p.is_file()]
        if missing or not paths:
            raise CommandError(f"--conversations: no such file(s): {', '.join(missing) or folder}")
        budget = int_option(options, "budget", 64, 32_000)

        reference = options["reference"]
        if reference and (needed := reference_missing()):
            raise CommandError(f"--reference: needs {needed}")
        if options["semantic"] and not semantic.available():
            raise CommandError(f"--semantic: needs {semantic.missing()}")
        busy = under_load_option(options)
        with override_settings(MEMORY_SEMANTIC=options["semantic"]), spinning(busy):
            self._evaluate(paths, budget, reference, busy, options)

    def _evaluate(
        self, paths: list[Path], budget: int, reference: bool, busy: int, options: dict[str, Any]
    ) -> None:
        if options["cross_validate"]:
            if len(paths) < 2:
                raise CommandError("--cross-validate: needs at least two conversations")
            report = cross_validate(
                paths, budget=budget, show_progress=True, objective=options["objective"]
            )
            report["semantic"] = options["semantic"]
            if reference:
                report["reference"] = _cross_validated_margin(report, paths, budget)
            under_load_note(report, busy)
            self.stdout.write(json.dumps(report))
            return
        report = locomo_recall(
            paths, budget=budget, profile=options["profile"], reference=reference
        )
        report["semantic"] = options["semantic"]
        under_load_note(report, busy)
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        for line in recall_lines(report):
            self.stdout.write(line)
        self.stdout.write(under_load_line(report))
        if options["semantic"]:
            self.stdout.write(
                "(ranked with the semantic backend: sentence vectors fused with BM25)"
            )
        if reference:
            self.stdout.write("")
            for line in reference_table(report):
                self.stdout.write(line)


def _cross_validated_margin(report: dict[str, Any], paths: list[Path], budget: int) -> dict:
    """The hybrid reference's figure for the objective cross-validated, and the margin of the
    held-out figure over it (the reference has no constant tuned on the data)."""
    figures = locomo_recall(paths, budget=budget, reference=True)
    hybrid = figures["references"]["hybrid"]["overall"]
    key = "full_all" if report["objective"] == "full" else "recall_all"
    return {
        "retriever": "hybrid",
        key: hybrid[key],
        "answer_contained": hybrid["answer_contained"],
        "margin": round(report["cross_validated"] - hybrid[key], 4),
        "answer_margin": round(
            report["cross_validated_answer_contained"] - hybrid["answer_contained"], 4
        ),
    }
