"""Evidence recall of the context compiler on LoCoMo conversations (``manage.py locomo_eval``):
each question of categories 1-4 is compiled as the query under the budget with the same
``context_compile`` that serves agents (``profile`` dialogue unless asked otherwise).

Citation recall reads the cited episodes back to ``dia_id``s: (all) every evidence turn cited,
(any) at least one. What the reader gets (``benchmarks.locomo.reading``): full-evidence recall
(all / any), the same with an evidence turn counted only when its whole text is in the
delivered markdown (a preview never counts); answer containment (the normalised gold answer
found as whole words in the markdown), per category and as a headline over categories 1, 2
and 4 (category 3 answers are inferred); the tokens delivered (cl100k, mean and median); the
previews (cited items shown as a preview or cut, per question, and the share of the cited
evidence turns that came only so)."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.locomo.conversations import conversation_drop, conversation_ingest
from benchmarks.locomo.reading import HEADLINE_CATEGORIES, answer_contained, evidence_read
from benchmarks.locomo.reference import REFERENCES, References, conversation_lines
from benchmarks.stats import percentile
from graph_app.compiler import context_compile
from memoryproject.tokens import count_tokens


def _ratio(hits: float, count: float) -> float:
    return hits / count if count else 0.0


def question_score(
    result: Any, qa: dict[str, Any], external: dict[str, Any], texts: dict[str, str]
) -> Counter[str]:
    """The tallies of one compiled question (``result``: a compile's answer, read by key)."""
    items = [i for i in result["items"] if i["kind"] == "episode"]
    by_turn = {external.get(i["id"]): i for i in items}
    cited = set(by_turn)
    evidence = qa["evidence"]
    markdown = result["markdown"]
    read = evidence_read(
        markdown, evidence, {t: i["citation"] for t, i in by_turn.items() if t}, texts
    )
    cited_evidence = evidence & cited
    return Counter(
        questions=1,
        cited=len(cited),
        hits_all=evidence <= cited,
        hits_any=bool(cited_evidence),
        full_all=evidence <= read,
        full_any=bool(read),
        contained=answer_contained(qa["answer"], markdown),
        tokens=count_tokens(markdown),
        previews=sum(bool(i["truncated"]) for i in result["items"]),
        evidence_cited=len(cited_evidence),
        evidence_previewed=sum(bool(by_turn[t]["truncated"]) for t in cited_evidence),
    )


class _Tally:
    """The tallies of one retriever over one conversation's questions."""

    def __init__(self) -> None:
        self.total: Counter[str] = Counter()
        self.by_category: dict[int, Counter[str]] = {}
        self.timings: list[float] = []
        self.cited_counts: list[int] = []
        self.tokens: list[int] = []

    def add(self, score: Counter[str], category: int, ms: float) -> None:
        self.timings.append(ms)
        self.cited_counts.append(score["cited"])
        self.tokens.append(score["tokens"])
        self.total.update(score)
        self.by_category.setdefault(category, Counter()).update(score)

    def row(self, name: str, turns: int, count: int) -> dict[str, Any]:
        total = self.total
        return {
            "conversation": name,
            "turns": turns,
            "questions": count,
            "recall_all": _ratio(total["hits_all"], count),
            "recall_any": _ratio(total["hits_any"], count),
            "compile_p50_ms": statistics.median(self.timings) if self.timings else 0.0,
            "mean_cited": statistics.fmean(self.cited_counts) if self.cited_counts else 0.0,
            **_reading(total, self.by_category, self.tokens),
            "_hits": (total["hits_all"], total["hits_any"]),
            "_total": total,
            "_categories": self.by_category,
            "_timings": self.timings,
            "_tokens": self.tokens,
        }


def evaluate_conversation(
    path: Path,
    *,
    budget: int,
    profile: str = "dialogue",
    show_progress: bool = True,
    reference: bool = False,
) -> dict[str, Any]:
    """The compiler's figures on one conversation; with ``reference``, also those of the
    reference retrievers (``benchmarks.locomo.reference``) on the same lines and budget, under
    ``"_references"``."""
    name = path.stem
    # A progress bar on stderr (stdout carries the results), only when it is a terminal.
    disable = None if show_progress else True
    project, external, questions, texts = conversation_ingest(path, disable=disable)
    try:
        # With the references, both indexes are built before the first question is timed.
        references = References(conversation_lines(project)) if reference else None
        ours = _Tally()
        others = {r: _Tally() for r in REFERENCES} if references else {}
        for qa in tqdm(questions, desc=f"{name} compile", disable=disable):
            start = time.perf_counter()
            result = context_compile(
                project=project, query=qa["question"], max_tokens=budget, profile=profile
            )
            ms = (time.perf_counter() - start) * 1000
            ours.add(question_score(result, qa, external, texts), qa["category"], ms)
            if references:  # timed right after ours, so that the host's load weighs on both
                answer, ms = references.answer("bm25", qa["question"], budget)
                others["bm25"].add(question_score(answer, qa, external, texts), qa["category"], ms)
        if references:
            _dense_references(references, others, questions, external, texts, budget)
    finally:
        conversation_drop(project)
    count = len(questions)
    row = ours.row(name, len(external), count)
    row["_references"] = {r: t.row(name, len(external), count) for r, t in others.items()}
    return row


def _dense_references(
    references: References,
    tallies: dict[str, _Tally],
    questions: list[dict[str, Any]],
    external: dict[str, Any],
    texts: dict[str, str],
    budget: int,
) -> None:
    """The dense and hybrid references' tallies, after the compiler's loop (the encoder's work
    stays out of the compiler's caches). Each question is timed end to end, encoded alone as a
    caller would; the figures are read from the questions encoded together."""
    queries = references.encoder.encode([qa["question"] for qa in questions])
    for qa, query in zip(questions, queries, strict=True):
        for r in ("dense", "hybrid"):
            _answer, ms = references.answer(r, qa["question"], budget)
            result = references.delivered(references.order(r, qa["question"], query), budget)
            tallies[r].add(question_score(result, qa, external, texts), qa["category"], ms)


def _reading(
    total: Counter[str], by_category: dict[int, Counter[str]], tokens: list[int]
) -> dict[str, Any]:
    """The measures of what the reader gets, over the questions tallied."""
    headline = sum((by_category.get(c, Counter()) for c in HEADLINE_CATEGORIES), Counter())
    return {
        "full_all": _ratio(total["full_all"], total["questions"]),
        "full_any": _ratio(total["full_any"], total["questions"]),
        "answer_contained": _ratio(headline["contained"], headline["questions"]),
        "tokens_mean": statistics.fmean(tokens) if tokens else 0.0,
        "tokens_p50": statistics.median(tokens) if tokens else 0.0,
        "previews_mean": _ratio(total["previews"], total["questions"]),
        "evidence_preview_share": _ratio(total["evidence_previewed"], total["evidence_cited"]),
    }


def _merged(results: list[dict[str, Any]]) -> dict[int, Counter[str]]:
    tallies: dict[int, Counter[str]] = {}
    for r in results:
        for category, tally in r["_categories"].items():
            tallies.setdefault(category, Counter()).update(tally)
    return tallies


def _overall(results: list[dict[str, Any]]) -> dict[str, Any]:
    questions = sum(r["questions"] for r in results)
    timings = [t for r in results for t in r["_timings"]]
    total: Counter[str] = sum((r["_total"] for r in results), Counter())
    return {
        "conversation": "overall",
        "turns": sum(r["turns"] for r in results),
        "questions": questions,
        "recall_all": sum(r["_hits"][0] for r in results) / questions if questions else 0.0,
        "recall_any": sum(r["_hits"][1] for r in results) / questions if questions else 0.0,
        "compile_p50_ms": statistics.median(timings) if timings else 0.0,
        "mean_cited": (statistics.fmean([r["mean_cited"] for r in results]) if results else 0.0),
        **_reading(total, _merged(results), [t for r in results for t in r["_tokens"]]),
    }


def _categories(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Citation recall (all), full-evidence recall (all) and answer containment per question
    category, over every conversation."""
    return {
        str(c): {
            "questions": t["questions"],
            "recall_all": t["hits_all"] / t["questions"],
            "full_all": t["full_all"] / t["questions"],
            "answer_contained": t["contained"] / t["questions"],
        }
        for c, t in sorted(_merged(results).items())
    }


def locomo_recall(
    paths: list[Path], *, budget: int, profile: str = "dialogue", reference: bool = False
) -> dict[str, Any]:
    """Recall of every conversation, overall and per question category; with ``reference``,
    the reference retrievers' figures on the same lines and budget (``"references"``) and the
    compiler's margin over the hybrid one (``"margin_vs_hybrid"``)."""
    results = [
        evaluate_conversation(p, budget=budget, profile=profile, reference=reference) for p in paths
    ]
    report: dict[str, Any] = {
        "budget": budget,
        "profile": profile,
        "conversations": [{k: v for k, v in r.items() if not k.startswith("_")} for r in results],
        "overall": _overall(results),
        "categories": _categories(results),
    }
    if reference:
        by_reference = {r: [res["_references"][r] for res in results] for r in REFERENCES}
        report["references"] = {
            r: {
                "overall": _overall(rows),
                "conversations": [
                    {k: v for k, v in row.items() if not k.startswith("_")} for row in rows
                ],
                "categories": _categories(rows),
            }
            for r, rows in by_reference.items()
        }
        hybrid = report["references"]["hybrid"]["overall"]
        report["margin_vs_hybrid"] = {
            key: round(report["overall"][key] - hybrid[key], 4)
            for key in ("full_all", "answer_contained")
        }
        report["timing"] = _timing(results)
    return report


def _timing(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-question milliseconds, end to end, over every conversation: p50 and p95
    (nearest rank) of the compiler and of each reference, and the compiler's over bm25's."""

    def spread(timings: list[float]) -> dict[str, float]:
        return {f"p{p}_ms": round(percentile(timings, p / 100), 3) for p in (50, 95)}

    ours = spread([t for r in results for t in r["_timings"]])
    timing: dict[str, Any] = {"ours": ours}
    for name in REFERENCES:
        timing[name] = spread([t for r in results for t in r["_references"][name]["_timings"]])
    for p in (50, 95):
        bm25 = timing["bm25"][f"p{p}_ms"]
        timing[f"ratio_p{p}"] = round(ours[f"p{p}_ms"] / bm25, 3) if bm25 else 0.0
    return timing


def recall_lines(report: dict[str, Any]) -> list[str]:
    header = (
        f"{'conversation':<14}{'questions':>10}{'recall_all':>12}{'recall_any':>12}"
        f"{'full_all':>10}{'full_any':>10}{'answer':>8}{'tokens':>8}{'tok p50':>8}"
        f"{'previews':>10}{'ev prev':>9}{'cited':>8}{'p50 ms':>9}"
    )
    lines = [
        f"LoCoMo evidence recall at {report['budget']} tokens, profile {report['profile']} "
        "(categories 1-4; answer: containment over categories 1, 2, 4)",
        header,
        "-" * len(header),
    ]
    for r in [*report["conversations"], report["overall"]]:
        lines.append(
            f"{r['conversation']:<14}{r['questions']:>10}{r['recall_all']:>12.3f}"
            f"{r['recall_any']:>12.3f}{r['full_all']:>10.3f}{r['full_any']:>10.3f}"
            f"{r['answer_contained']:>8.3f}{r['tokens_mean']:>8.0f}{r['tokens_p50']:>8.0f}"
            f"{r['previews_mean']:>10.1f}{r['evidence_preview_share']:>9.3f}"
            f"{r['mean_cited']:>8.1f}{r['compile_p50_ms']:>9.2f}"
        )
    lines += [
        "",
        f"{'category':<14}{'questions':>10}{'recall_all':>12}{'full_all':>10}{'answer':>8}",
    ]
    for name, c in report["categories"].items():
        lines.append(
            f"{name:<14}{c['questions']:>10}{c['recall_all']:>12.3f}{c['full_all']:>10.3f}"
            f"{c['answer_contained']:>8.3f}"
        )
    return lines
