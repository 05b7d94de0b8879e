"""Evidence recall of the context compiler on LoCoMo conversations (``manage.py locomo_eval``):
each question of categories 1-4 is compiled as the query under the budget with the same
``context_compile`` that serves agents, and the cited episodes are read back to ``dia_id``s.
Recall (all): every evidence turn cited; recall (any): at least one."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.locomo.conversations import conversation_drop, conversation_ingest
from graph_app.compiler import context_compile


def evaluate_conversation(path: Path, *, budget: int, show_progress: bool = True) -> dict[str, Any]:
    name = path.stem
    # A progress bar on stderr (stdout carries the results), only when it is a terminal.
    disable = None if show_progress else True
    project, external, questions = conversation_ingest(path, disable=disable)
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
        conversation_drop(project)
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


def _overall(results: list[dict[str, Any]]) -> dict[str, Any]:
    questions = sum(r["questions"] for r in results)
    timings = [t for r in results for t in r["_timings"]]
    return {
        "conversation": "overall",
        "turns": sum(r["turns"] for r in results),
        "questions": questions,
        "recall_all": sum(r["_hits"][0] for r in results) / questions if questions else 0.0,
        "recall_any": sum(r["_hits"][1] for r in results) / questions if questions else 0.0,
        "compile_p50_ms": statistics.median(timings) if timings else 0.0,
        "mean_cited": (statistics.fmean([r["mean_cited"] for r in results]) if results else 0.0),
    }


def _categories(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Recall (all) per question category, over every conversation."""
    tallies: dict[int, list[int]] = {}
    for r in results:
        for category, (count, hits) in r["_categories"].items():
            tally = tallies.setdefault(category, [0, 0])
            tally[0] += count
            tally[1] += hits
    return {
        str(c): {"questions": n, "recall_all": hits / n} for c, (n, hits) in sorted(tallies.items())
    }


def locomo_recall(paths: list[Path], *, budget: int) -> dict[str, Any]:
    """Recall of every conversation, overall and per question category."""
    results = [evaluate_conversation(p, budget=budget) for p in paths]
    return {
        "budget": budget,
        "conversations": [{k: v for k, v in r.items() if not k.startswith("_")} for r in results],
        "overall": _overall(results),
        "categories": _categories(results),
    }


def recall_lines(report: dict[str, Any]) -> list[str]:
    header = (
        f"{'conversation':<14}{'questions':>10}{'recall_all':>12}{'recall_any':>12}"
        f"{'cited':>8}{'p50 ms':>9}"
    )
    lines = [
        f"LoCoMo evidence recall at {report['budget']} tokens (categories 1-4)",
        header,
        "-" * len(header),
    ]
    for r in [*report["conversations"], report["overall"]]:
        lines.append(
            f"{r['conversation']:<14}{r['questions']:>10}{r['recall_all']:>12.3f}"
            f"{r['recall_any']:>12.3f}{r['mean_cited']:>8.1f}{r['compile_p50_ms']:>9.2f}"
        )
    lines += ["", f"{'category':<14}{'questions':>10}{'recall_all':>12}"]
    for name, c in report["categories"].items():
        lines.append(f"{name:<14}{c['questions']:>10}{c['recall_all']:>12.3f}")
    return lines
