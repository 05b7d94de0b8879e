"""Measures the graph and the compiler on a synthetic memory (``synthetic.py``): latency of
the services and selectors an agent calls, stale-fact suppression and budget compliance, and the
compiler's p50/p95 as a ratio to the in-memory reference (``reference.py``) over the same
corpus and queries.
"""

from __future__ import annotations

import gc
import random
import secrets
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.test.utils import override_settings
from tqdm import tqdm

from audit_app.findings import contradictions_audit
from benchmarks.memory.coldstart import cold_start_measure
from benchmarks.memory.reference import ReferenceIndex
from benchmarks.memory.reference_load import reference_build
from benchmarks.memory.stages import stage_profile
from benchmarks.memory.synthetic import (
    BUDGET,
    CATEGORIES,
    SCALES,
    SINGULAR,
    Corpus,
    Queries,
    Scale,
    Show,
    project_drop,
    queries_for,
    scale_label,
    timed,
)
from benchmarks.stats import percentile
from graph_app.compiler import context_compile
from graph_app.entity_reads import entity_query
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear
from graph_app.integrity import integrity_verify
from graph_app.models import TemporalFact
from memoryproject.contracts import Caller
from memoryproject.models import Project
from memoryproject.tokens import count_tokens

COMPILE_BLOCK = 5  # queries each side compiles in a row


@dataclass
class _Measures:
    """Timings (ms) per operation and the correctness counts of one run."""

    times: dict[str, list[float]] = field(default_factory=dict)
    compliant: int = 0
    stale_total: int = 0
    stale_shown: int = 0
    verified: bool = True
    reference_compliant: int = 0
    stages: dict[str, Any] | None = None

    def timed(self, operation: str, fn: Callable[[], Any]) -> Any:
        elapsed, result = timed(fn)
        self.times.setdefault(operation, []).append(elapsed)
        return result


def _measure_compiles(
    project: Project,
    queries: Queries,
    reference: ReferenceIndex,
    show: Show,
    m: _Measures,
) -> None:
    """The queries compiled by ours and by the reference in alternating blocks of
    ``COMPILE_BLOCK`` (ours first, then the reference first, in turn), so that both see the
    same load on a busy machine while each runs its compiles back to back, as a server does
    (one compile after another of the other's would find the caches holding the other's
    structures)."""
    blocks = [queries[i : i + COMPILE_BLOCK] for i in range(0, len(queries), COMPILE_BLOCK)]
    sides = (partial(_ours_block, project), partial(_reference_block, reference))
    for number, block in enumerate(show(blocks, desc="compile_context")):
        for side in sides if number % 2 == 0 else sides[::-1]:
            side(block, m)


def _ours_block(project: Project, block: Queries, m: _Measures) -> None:
    for query, stale_ids in block:
        result = m.timed(
            "compile_context",
            partial(context_compile, project=project, query=query, max_tokens=BUDGET),
        )
        m.compliant += (
            result["token_count"] <= BUDGET
            and count_tokens(result["markdown"]) == result["token_count"]
        )
        shown = {i["id"] for i in result["items"]}
        m.stale_total += len(stale_ids)
        m.stale_shown += len(shown & set(stale_ids))


def _reference_block(reference: ReferenceIndex, block: Queries, m: _Measures) -> None:
    for query, _ in block:
        packed = m.timed("reference_compile", partial(reference.compile, query, BUDGET))
        m.reference_compliant += packed.token_count <= BUDGET


def _measure_writes(
    project: Project, corpus: Corpus, rng: random.Random, show: Show, m: _Measures
) -> None:
    samples = corpus.scale.samples
    for i in show(range(samples), desc="record_episode"):
        a, b = rng.sample(corpus.entities, 2)
        m.timed(
            "record_episode",
            partial(
                episode_record,
                project=project,
                title=f"Benchmark note {i} on {a}",
                category=CATEGORIES[i % len(CATEGORIES)],
                content=f"{a} now calls {b} through the outbox; see src/{a}.py",
                files_touched=[f"src/{a}.py"],
                entities_mentioned=[a, b],
            ),
        )
    for i in show(range(samples), desc="upsert_fact"):
        subject = rng.choice(corpus.entities)
        predicate = rng.choice(list(SINGULAR))
        m.timed(
            "upsert_fact",
            partial(
                fact_upsert,
                project=project,
                subject_id=subject,
                predicate=predicate,
                object_value=f"bench_value_{i}",
            ),
        )


def _measure_compiles_after_writes(
    project: Project, corpus: Corpus, queries: Queries, rng: random.Random, show: Show, m: _Measures
) -> None:
    """What an agent gets when it records a fact and then asks for context: each compile right
    after a write of its own (the write itself untimed), so the index takes that write in first."""
    for i in show(range(corpus.scale.samples), desc="compile_after_write"):
        fact_upsert(
            project=project,
            subject_id=rng.choice(corpus.entities),
            predicate=rng.choice(list(SINGULAR)),
            object_value=f"bench_after_{i}_{secrets.token_hex(4)}",
        )
        query = queries[i % len(queries)][0]
        m.timed(
            "compile_after_write",
            partial(context_compile, project=project, query=query, max_tokens=BUDGET),
        )


def _measure_reads(
    project: Project, corpus: Corpus, rng: random.Random, show: Show, m: _Measures
) -> None:
    for _ in show(range(corpus.scale.samples), desc="entity_query"):
        entity = rng.choice(corpus.entities)
        m.timed(
            "entity_query", partial(entity_query, project=project, entity_id=entity, max_hops=2)
        )
    runs = corpus.scale.integrity_runs
    for _ in show(range(runs), desc="integrity"):
        report = m.timed("integrity_verify", partial(integrity_verify, project=project))
        m.verified = m.verified and bool(report.get("verified"))
        caller = Caller(channel="benchmark", client="memory_benchmark")
        m.timed(
            "audit_contradictions",
            partial(contradictions_audit, project=project, caller=caller),
        )


def _project_open(label: str, seed: int, keep: bool) -> tuple[Project, bool]:
    """The project the corpus goes into, and whether it already holds it: a kept corpus is
    named by its size and seed and found again by the next run that keeps."""
    if keep:
        slug = f"bench-keep-{label}-s{seed}"
        project, created = Project.objects.get_or_create(
            slug=slug, defaults={"name": f"memory_benchmark {label} (kept)"}
        )
        return project, not created and TemporalFact.objects.filter(project=project).exists()
    slug = f"bench-{label}-{secrets.token_hex(4)}"
    return Project.objects.create(slug=slug, name=f"memory_benchmark {label}"), False


def _measure(
    project: Project, corpus: Corpus, seed: int, show: Show, m: _Measures, stages: bool
) -> int:
    """Runs every measure on the loaded corpus (``stages``: also the delivered compile's time
    per stage); answers the number of compile queries."""
    scale = corpus.scale
    corpus.read_back(chains=scale.queries // 2 + 1)
    # Apart from the corpus's own: a kept corpus gets the same queries as a fresh one.
    rng = random.Random(f"{seed}:measure")
    queries = queries_for(corpus, scale.queries, rng)
    m.timed("build", partial(context_compile, project=project, query="warm up", max_tokens=BUDGET))
    reference = m.timed("reference_build", partial(reference_build, project))
    gc.freeze()  # the reference's dicts settled as the compiler settles its index
    _measure_compiles(project, queries, reference, show, m)
    if stages:
        m.stages = stage_profile(project, [query for query, _ in queries], BUDGET)
    # The yardstick is done: gone, it no longer weighs on every collection the writes, reads
    # and verification below go through (at 100k facts, verification took 1.5x as long).
    del reference
    _measure_writes(project, corpus, rng, show, m)
    m.timed(
        "refresh",
        partial(context_compile, project=project, query="after writes", max_tokens=BUDGET),
    )
    _measure_compiles_after_writes(project, corpus, queries, rng, show, m)
    _measure_reads(project, corpus, rng, show, m)
    return len(queries)


def run_benchmark(
    scale: str | int,
    *,
    seed: int,
    show_progress: bool = True,
    keep: bool = False,
    cold_start: bool = False,
    stages: bool = False,
) -> dict[str, Any]:
    """Loads the corpus of ``scale`` (a named scale or a number of facts), measures it, and
    deletes it unless ``keep``. With ``cold_start``, a fresh process also compiles once over
    it (``cold_start_measure``), once building the index from the rows and once as a
    deployment starts (from the index snapshot when there is one), to tell the first compile's
    time and the index's memory."""
    label = scale if isinstance(scale, str) else scale_label(scale)
    shape = SCALES[scale] if isinstance(scale, str) else Scale.of_facts(scale)
    show: Show = partial(tqdm, disable=None if show_progress else True)
    project, reused = _project_open(label, seed, keep)
    m = _Measures()
    cold: dict[str, Any] | None = None
    try:
        corpus = Corpus(project, shape, random.Random(seed))
        if not reused:
            m.timed("load", lambda: corpus.load(show))
        # Measured as production runs: DEBUG off, so statements are not recorded in memory
        # (on SQLite the debug cursor also runs a quoting query per statement).
        with override_settings(DEBUG=False):
            queries = _measure(project, corpus, seed, show, m, stages)
        if cold_start:
            compiler_cache_clear()  # this process's index (its snapshot stays)
            question = f"what does {corpus.entities[0]} depend on"
            rebuilt = cold_start_measure(project.slug, query=question, snapshots=False)
            cold = cold_start_measure(project.slug, query=question)
            cold["rebuilt_from_rows"] = rebuilt
    finally:
        if keep:
            compiler_cache_clear()
        else:
            project_drop(project)
    report = _report(label, seed, shape, m, queries)
    report["corpus"]["kept"] = project.slug if keep else None
    report["corpus"]["reused"] = reused
    if cold is not None:
        report["cold_start"] = cold
    if m.stages is not None:
        report["stage_profile"] = m.stages
    return report


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 3) if values else 0.0,
        "p95_ms": round(percentile(values, 0.95), 3),
    }


def _ratio(ours: float, theirs: float) -> float | None:
    return round(ours / theirs, 2) if theirs else None


def _reference_report(m: _Measures, queries: int) -> dict[str, Any]:
    ours = _stats(m.times.get("compile_context", []))
    theirs = _stats(m.times.get("reference_compile", []))
    return {
        "compile": theirs,
        "build_ms": round(m.times["reference_build"][0], 1),
        "budget_compliance_rate": m.reference_compliant / queries if queries else 1.0,
        # ours / the reference's: below 1.0, ours is the faster
        "compile_p50_ratio": _ratio(ours["p50_ms"], theirs["p50_ms"]),
        "compile_p95_ratio": _ratio(ours["p95_ms"], theirs["p95_ms"]),
    }


def _report(label: str, seed: int, scale: Scale, m: _Measures, queries: int) -> dict[str, Any]:
    operations = (
        "record_episode",
        "upsert_fact",
        "entity_query",
        "compile_context",
        "compile_after_write",
        "integrity_verify",
        "audit_contradictions",
    )
    return {
        "scale": label,
        "seed": seed,
        "corpus": {
            "entities": scale.entities,
            "facts": scale.facts,
            "superseded": scale.superseded,
            "episodes": scale.episodes,
            "compile_queries": scale.queries,
            "budget_tokens": BUDGET,
        },
        "operations": {name: _stats(m.times.get(name, [])) for name in operations},
        "reference": _reference_report(m, queries),
        "load_ms": round(m.times["load"][0], 1) if "load" in m.times else None,
        "index_build_ms": round(m.times["build"][0], 1),
        "index_refresh_after_writes_ms": round(m.times["refresh"][0], 1),
        "stale_suppression_rate": 1 - m.stale_shown / m.stale_total if m.stale_total else 1.0,
        "stale_candidates": m.stale_total,
        "budget_compliance_rate": m.compliant / queries if queries else 1.0,
        "integrity_verified": m.verified,
    }
