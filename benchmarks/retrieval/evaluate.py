"""Retrieval quality of the context compiler on a generated engineering memory
(``manage.py memory_eval``).

Loads the seeded corpus of ``corpus.py`` into a temporary project through the same services
agents use (``fact_upsert``, ``episode_record``), compiles every question under the budget with
``context_compile`` (time-travel questions ``as_of`` their day) and reads the citations back.
Reports, per question kind and overall: recall (share of the gold records cited), answered
(share of questions with every gold record cited) and answered whole (share of questions with
every gold record delivered as a whole line: neither a preview nor cut, which the compile marks
``truncated``); stale items cited (facts not valid at the
question's instant: superseded, or scheduled for later; must be 0), budget compliance,
compile p50, the tokens delivered (cl100k, mean and p50) and the previews per question. The
project is deleted at the end.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections import defaultdict
from typing import Any

from benchmarks.memory.synthetic import project_drop
from benchmarks.retrieval.corpus import Corpus, Question, generate, stale_refs
from graph_app.compiler import context_compile
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from memoryproject.tokens import count_tokens
from memoryproject.writes import write_transaction


def _load(project: Project, corpus: Corpus) -> dict[str, str]:
    """Writes the corpus; answers the fact id of each fact ref."""
    fact_ids: dict[str, str] = {}
    with write_transaction():
        for e in corpus.episodes:
            episode_record(
                project=project,
                external_id=e.external_id,
                category=e.category,
                title=e.title,
                content=e.content,
                occurred_at=e.occurred_at,
                files_touched=list(e.files),
                entities_mentioned=list(e.entities),
            )
        for f in corpus.facts:
            result = fact_upsert(
                project=project,
                subject_id=f.subject,
                predicate=f.predicate,
                object_value=f.value,
                valid_from=f.valid_from,
                singular=f.singular,
            )
            fact_ids[f.ref] = result["fact"]["id"]
    return fact_ids


def _ask(
    project: Project, corpus: Corpus, q: Question, fact_ids: dict[str, str], budget: int
) -> dict[str, Any]:
    start = time.perf_counter()
    result = context_compile(project=project, query=q.query, max_tokens=budget, as_of=q.as_of)
    elapsed = (time.perf_counter() - start) * 1000
    cited = set()
    whole = set()
    for item in result["items"]:
        cited.add(item["external_id"] or item["id"])
        if not item["truncated"]:
            whole.add(item["external_id"] or item["id"])
    gold = {fact_ids[g[5:]] if g.startswith("fact:") else g for g in q.gold}
    stale = {fact_ids[r] for r in stale_refs(corpus, q.as_of or utcnow())}
    return {
        "kind": q.kind,
        "query": q.query,
        "gold": len(gold),
        "found": len(gold & cited),
        "found_whole": len(gold & whole),
        "tokens": count_tokens(result["markdown"]),
        "previews": sum(bool(item["truncated"]) for item in result["items"]),
        "missed": sorted(gold - cited),
        "stale_cited": len(stale & cited),
        "compliant": result["token_count"] <= budget
        and count_tokens(result["markdown"]) == result["token_count"],
        "ms": elapsed,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    gold = sum(r["gold"] for r in rows)
    return {
        "questions": len(rows),
        "recall": round(sum(r["found"] for r in rows) / gold, 4) if gold else 1.0,
        "answered": round(sum(r["found"] == r["gold"] for r in rows) / len(rows), 4),
        "answered_whole": round(sum(r["found_whole"] == r["gold"] for r in rows) / len(rows), 4),
    }


def run_eval(*, seed: int, services: int, budget: int) -> dict[str, Any]:
    corpus = generate(seed=seed, services=services)
    project = Project.objects.create(
        slug=f"memory-eval-{secrets.token_hex(4)}", name="memory_eval (temporary)"
    )
    try:
        fact_ids = _load(project, corpus)
        rows = [_ask(project, corpus, q, fact_ids, budget) for q in corpus.questions]
    finally:
        project_drop(project)
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    return {
        "seed": seed,
        "budget": budget,
        "corpus": {
            "services": services,
            "facts": len(corpus.facts),
            "episodes": len(corpus.episodes),
        },
        "overall": _summary(rows),
        "kinds": {kind: _summary(group) for kind, group in sorted(by_kind.items())},
        "stale_cited": sum(r["stale_cited"] for r in rows),
        "budget_compliance": sum(r["compliant"] for r in rows) / len(rows),
        "compile_p50_ms": round(statistics.median(r["ms"] for r in rows), 3),
        "tokens_mean": round(statistics.fmean(r["tokens"] for r in rows), 1),
        "tokens_p50": statistics.median(r["tokens"] for r in rows),
        "previews_mean": round(statistics.fmean(r["previews"] for r in rows), 2),
        "misses": [
            {"kind": r["kind"], "query": r["query"], "missed": r["missed"]}
            for r in rows
            if r["missed"]
        ],
    }


def report_lines(report: dict[str, Any]) -> list[str]:
    c = report["corpus"]
    lines = [
        f"memory_eval --seed {report['seed']}: {c['services']} services, {c['facts']} facts, "
        f"{c['episodes']} episodes, budget {report['budget']} tokens",
        f"{'kind':<14}{'questions':>10}{'recall':>9}{'answered':>10}{'whole':>8}",
        "-" * 51,
    ]
    for kind, s in [*report["kinds"].items(), ("overall", report["overall"])]:
        lines.append(
            f"{kind:<14}{s['questions']:>10}{s['recall']:>9.3f}{s['answered']:>10.3f}"
            f"{s['answered_whole']:>8.3f}"
        )
    lines += [
        "-" * 51,
        f"stale items cited   {report['stale_cited']}",
        f"budget compliance   {report['budget_compliance']:.1%}",
        f"compile p50         {report['compile_p50_ms']:.2f} ms",
        f"tokens delivered    {report['tokens_mean']:.0f} mean, {report['tokens_p50']:.0f} p50",
        f"previews            {report['previews_mean']:.1f} per question",
    ]
    for miss in report["misses"]:
        lines.append(f"missed [{miss['kind']}] {miss['query']} -> {', '.join(miss['missed'])}")
    return lines
