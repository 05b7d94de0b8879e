"""Evidence recall of the context compiler on LoCoMo conversations.

Follows the protocol of the dataset's README: every dialogue turn becomes one episode (its text,
the image description when there is one, its speaker as title and its session's date as
``occurred_at``), with the turn's ``dia_id`` as external id and its session as the episode's
stream (``metadata: {"stream", "position"}``). Each question of categories 1-4 is compiled as the
query under ``--budget`` tokens with the same ``context_compile`` that serves agents, and the
cited episodes are read back to ``dia_id``s. Answers, summaries, observations and event
annotations are never read. Each conversation goes into its own temporary project, deleted at
the end.

    manage.py locomo_eval --data ../shared/datasets/locomo --budget 800 [--conversations conv-26] [--json]
    manage.py locomo_eval --data ../shared/datasets/locomo --cross-validate
"""

from __future__ import annotations

import itertools
import json
import secrets
import statistics
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from graph_app.compiler import context_cited, context_compile
from graph_app.domain.crossval import leave_one_out, pooled
from graph_app.domain.profiles import DIALOGUE, Profile
from graph_app.episode_writes import episode_record
from graph_app.index_cache import compiler_cache_forget
from graph_app.models import Episode
from memoryproject.models import Project
from memoryproject.writes import write_transaction

CATEGORIES = (1, 2, 3, 4)
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


def _session_date(value: str) -> datetime:
    return datetime.strptime(value.strip(), DATE_FORMAT).replace(tzinfo=UTC)


def conversation_turns(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Episode arguments for every turn of a conversation, in order."""
    turns: list[dict[str, Any]] = []
    session = 1
    while f"session_{session}" in data:
        when = _session_date(data[f"session_{session}_date_time"])
        for position, turn in enumerate(data[f"session_{session}"]):
            content = turn["text"]
            if turn.get("blip_caption"):
                content += f" [shares an image: {turn['blip_caption']}]"
            turns.append(
                {
                    "title": turn["speaker"],
                    "category": "session_note",
                    "content": content,
                    "occurred_at": when,
                    "external_id": turn["dia_id"],
                    "metadata": {"stream": f"{name}/session_{session}", "position": position},
                }
            )
        session += 1
    return turns


def conversation_questions(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Questions of categories 1-4 with their evidence ``dia_id``s (an entry such as
    "D8:6; D9:17" names two turns); questions without evidence cannot be scored."""
    questions = []
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = {part.strip() for entry in qa.get("evidence", []) for part in entry.split(";")}
        evidence.discard("")
        if evidence:
            questions.append(
                {"question": qa["question"], "evidence": evidence, "category": qa["category"]}
            )
    return questions


def _ingest(path: Path, *, disable: bool | None) -> tuple[Project, dict[str, Any], list[dict]]:
    """A temporary project holding the conversation's turns: (project, episode id -> dia_id,
    questions)."""
    name = path.stem
    data = json.loads(path.read_text())
    project = Project.objects.create(
        slug=f"locomo-eval-{name}-{secrets.token_hex(4)}", name=f"LoCoMo eval {name}"
    )
    with write_transaction():
        for turn in tqdm(conversation_turns(data, name), desc=f"{name} ingest", disable=disable):
            episode_record(project=project, **turn)
    external = dict(Episode.objects.filter(project=project).values_list("id", "external_id"))
    return project, external, conversation_questions(data)


def _drop(project: Project) -> None:
    compiler_cache_forget(project.pk)
    project.delete()


def evaluate_conversation(path: Path, *, budget: int, show_progress: bool = True) -> dict[str, Any]:
    name = path.stem
    # A progress bar on stderr (stdout carries the results), only when it is a terminal.
    disable = None if show_progress else True
    project, external, questions = _ingest(path, disable=disable)
    try:
        hits_all = hits_any = 0
        # Per question category: [questions, questions with every evidence turn cited].
        by_category: dict[int, list[int]] = {}
        timings: list[float] = []
        cited_counts: list[int] = []
        for qa in tqdm(questions, desc=f"{name} compile", disable=disable):
            start = time.perf_counter()
            result = context_compile(
                project=project, query=qa["question"], max_tokens=budget, profile="dialogue"
            )
            timings.append((time.perf_counter() - start) * 1000)
            cited = {external.get(i["id"]) for i in result["items"] if i["kind"] == "episode"}
            cited_counts.append(len(cited))
            hits_all += qa["evidence"] <= cited
            tally = by_category.setdefault(qa["category"], [0, 0])
            tally[0] += 1
            tally[1] += qa["evidence"] <= cited
            hits_any += bool(qa["evidence"] & cited)
    finally:
        _drop(project)
    count = len(questions)
    return {
        "conversation": name,
        "turns": len(external),
        "questions": count,
        "recall_all": hits_all / count if count else 0.0,
        "recall_any": hits_any / count if count else 0.0,
        "compile_p50_ms": statistics.median(timings) if timings else 0.0,
        "mean_cited": statistics.fmean(cited_counts) if cited_counts else 0.0,
        "_hits": (hits_all, hits_any),
        "_categories": by_category,
        "_timings": timings,
    }


# The dialogue profile's constants searched by --cross-validate (the shipped values are in it).
GRID = {
    "title_prior": (0.0, 0.5, 0.85),
    "length_norm": (0.5, 0.75),
    "full_share": (0.1, 0.2),
    "preview_tokens": (6, 12),
    "stream_weight": (0.5, 0.8),
    "related_weight": (0.0, 0.25, 0.35, 0.45),
}
# The grid's constants that are ranking parameters (the others are the profile's own).
RANK_CONSTANTS = ("title_prior", "length_norm", "stream_weight", "related_weight")


def _variant(setting: tuple[Any, ...]) -> Profile:
    values = dict(zip(GRID, setting, strict=True))
    rank = replace(DIALOGUE.rank, **{k: values.pop(k) for k in RANK_CONSTANTS})
    return replace(DIALOGUE, rank=rank, **values)


def _shipped() -> tuple[Any, ...]:
    return tuple(
        getattr(DIALOGUE.rank if name in RANK_CONSTANTS else DIALOGUE, name) for name in GRID
    )


def cross_validate(paths: list[Path], *, budget: int, show_progress: bool) -> dict[str, Any]:
    """Recall (all) of every GRID setting on every conversation, then leave-one-conversation-
    out: each conversation scored with the setting that is best on the others."""
    disable = None if show_progress else True
    scores: dict[tuple[Any, ...], dict[str, tuple[int, int]]] = {}
    settings = list(itertools.product(*GRID.values()))
    for path in paths:
        project, external, questions = _ingest(path, disable=disable)
        try:
            for setting in tqdm(settings, desc=f"{path.stem} grid", disable=disable):
                profile = _variant(setting)
                hits = 0
                for qa in questions:
                    ids = context_cited(
                        project=project, query=qa["question"], max_tokens=budget, profile=profile
                    )
                    hits += qa["evidence"] <= {external.get(i) for i in ids}
                scores.setdefault(setting, {})[path.stem] = (hits, len(questions))
        finally:
            _drop(project)
    # No preference for the shipped setting on ties: it was chosen knowing every fold.
    cv = leave_one_out(scores)
    return {
        "budget": budget,
        "grid": {k: list(v) for k, v in GRID.items()},
        "shipped": dict(zip(GRID, _shipped(), strict=True)),
        "shipped_in_sample": round(pooled(scores, _shipped(), [p.stem for p in paths]), 4),
        "best": dict(zip(GRID, cv.best, strict=True)),
        "best_in_sample": round(cv.in_sample, 4),
        "cross_validated": round(cv.cross_validated, 4),
        "folds": [
            {
                "held_out": f.held_out,
                "chosen": dict(zip(GRID, f.chosen, strict=True)),
                "recall_all": round(f.hits / f.questions, 4) if f.questions else 0.0,
            }
            for f in cv.folds
        ],
    }


class Command(BaseCommand):
    help = "Evidence recall (all / any) of context_compile on LoCoMo conversations."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--data", required=True, help="folder holding conv-*.json files")
        parser.add_argument("--budget", type=int, default=800, help="max_tokens per compile")
        parser.add_argument(
            "--conversations", default="", help="comma-separated names, e.g. conv-26,conv-30"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--cross-validate",
            action="store_true",
            help="score the dialogue profile's constants over a grid and report the in-sample "
            "and the leave-one-conversation-out figures (always JSON)",
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
        budget = options["budget"]
        if not 64 <= budget <= 32_000:
            raise CommandError("--budget: must be an integer from 64 to 32000")

        if options["cross_validate"]:
            if len(paths) < 2:
                raise CommandError("--cross-validate: needs at least two conversations")
            report = cross_validate(paths, budget=budget, show_progress=True)
            self.stdout.write(json.dumps(report))
            return
        results = [evaluate_conversation(p, budget=budget) for p in paths]
        questions = sum(r["questions"] for r in results)
        timings = [t for r in results for t in r["_timings"]]
        overall = {
            "conversation": "overall",
            "turns": sum(r["turns"] for r in results),
            "questions": questions,
            "recall_all": sum(r["_hits"][0] for r in results) / questions if questions else 0.0,
            "recall_any": sum(r["_hits"][1] for r in results) / questions if questions else 0.0,
            "compile_p50_ms": statistics.median(timings) if timings else 0.0,
            "mean_cited": (
                statistics.fmean([r["mean_cited"] for r in results]) if results else 0.0
            ),
        }
        tallies: dict[int, list[int]] = {}
        for r in results:
            for category, (count, hits) in r["_categories"].items():
                tally = tallies.setdefault(category, [0, 0])
                tally[0] += count
                tally[1] += hits
        # Recall (all) per question category, over every conversation.
        categories = {
            str(c): {"questions": n, "recall_all": hits / n}
            for c, (n, hits) in sorted(tallies.items())
        }
        rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in results]
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "budget": budget,
                        "conversations": rows,
                        "overall": overall,
                        "categories": categories,
                    }
                )
            )
            return
        self.stdout.write(f"LoCoMo evidence recall at {budget} tokens (categories 1-4)")
        header = f"{'conversation':<14}{'questions':>10}{'recall_all':>12}{'recall_any':>12}{'cited':>8}{'p50 ms':>9}"
        self.stdout.write(header)
        self.stdout.write("-" * len(header))
        for r in [*rows, overall]:
            self.stdout.write(
                f"{r['conversation']:<14}{r['questions']:>10}{r['recall_all']:>12.3f}"
                f"{r['recall_any']:>12.3f}{r['mean_cited']:>8.1f}{r['compile_p50_ms']:>9.2f}"
            )
        self.stdout.write("")
        self.stdout.write(f"{'category':<14}{'questions':>10}{'recall_all':>12}")
        for name, c in categories.items():
            self.stdout.write(f"{name:<14}{c['questions']:>10}{c['recall_all']:>12.3f}")
