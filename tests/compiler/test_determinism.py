"""The same memory gives the same context whatever its server-made ids or the order it was
recorded in: items the ranking cannot tell apart (equal scores, equal packing keys) are ordered
by what the user recorded, never by an id (graph_app/domain/tiebreak.py)."""

from __future__ import annotations

import random
import re

import pytest

from graph_app.compiler import context_compile
from graph_app.domain.memory_doc import MemoryDoc
from graph_app.domain.tiebreak import content_digest, tie_key
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear
from memoryproject.models import Project

pytestmark = pytest.mark.django_db

# Several episodes with the very same words (equal BM25 scores), some on the same day, some
# not; facts whose subjects the queries do not name (equal scores again); a few distinct ones.
_SAME = "The deploy pipeline cache was flushed after the nightly build failed on the runner."
EPISODES = [
    *(
        dict(
            title="Pipeline cache flush",
            category="incident",
            content=_SAME,
            occurred_at=f"2026-03-{day:02d}T09:00:00Z",
            external_id=f"INC-{n}",
        )
        for n, day in ((1, 2), (2, 2), (3, 2), (4, 5), (5, 5), (6, 9), (7, 9), (8, 9))
    ),
    *(
        dict(
            title="Runner note",
            category="session_note",
            content=f"The runner {word} needed a restart before the nightly build.",
            occurred_at="2026-03-04T10:00:00Z",
            external_id=f"NOTE-{n}",
        )
        for n, word in enumerate(("disk", "pool", "host", "image"))
    ),
    dict(
        title="Cache policy",
        category="adr",
        content="Pipeline caches are keyed by lockfile hash and never shared across branches.",
        occurred_at="2026-02-20T12:00:00Z",
        external_id="ADR-7",
        entities_mentioned=["deploy_pipeline"],
    ),
]
FACTS = [
    *(
        dict(subject_id=f"{name}_service", predicate="uses_cache", object_value="redis_cluster")
        for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
    ),
    dict(
        subject_id="deploy_pipeline",
        predicate="runs_on",
        object_value="nightly_runner",
        valid_from="2026-01-05T00:00:00Z",
    ),
    dict(
        subject_id="deploy_pipeline",
        predicate="depends_on",
        object_value="redis_cluster",
        singular=False,
    ),
]
# Tight budgets where episodes (cited by their external ids) compete; room for every fact
# where facts do: a fact line cites its server-made id and hash, whose token count differs
# from one project to the next, so a nearly full budget may take or leave the last fact.
QUERIES = [
    ("pipeline cache flushed nightly build", 120),
    ("pipeline cache flushed nightly build", 400),
    ("uses cache redis cluster", 1000),
    ("what does deploy_pipeline depend on", 1000),
    ("runner restart", 150),
]


def _record(slug: str, order: list[int]) -> tuple[Project, dict[str, str]]:
    """The project ``slug`` holding all the records, written in ``order``; with each
    server-made id's stand-in (the episode's external id, the fact's own words)."""
    project = Project.objects.create(slug=slug, name=slug)
    labels: dict[str, str] = {}
    writes = [("episode", e) for e in EPISODES] + [("fact", f) for f in FACTS]
    for at in order:
        kind, fields = writes[at]
        if kind == "episode":
            out = episode_record(project=project, **fields)
            labels[out["id"]] = f"ep<{fields['external_id']}>"
        else:
            fields = {"valid_from": "2026-03-01T00:00:00Z", **fields}
            out = fact_upsert(project=project, **fields)
            labels[out["fact"]["id"]] = f"fact<{fields['subject_id']}.{fields['predicate']}>"
    return project, labels


def _delivered(project: Project, labels: dict[str, str], query: str, budget: int):
    """What a compile delivers, server-made ids and the id-covering hashes masked."""
    result = context_compile(project=project, query=query, max_tokens=budget)
    markdown = result["markdown"]
    for server_id, label in labels.items():
        markdown = markdown.replace(server_id, label)
    markdown = re.sub(r"@sha256:[0-9a-f]{8}", "@sha256:…", markdown)
    # (not each item's tokens: a fact's line holds its id and hash, which count differently)
    items = [
        (item["kind"], labels[item["id"]], item["score"], item["truncated"])
        for item in result["items"]
    ]
    return markdown, items


def test_same_memory_same_context_whatever_ids_and_ingest_order():
    n = len(EPISODES) + len(FACTS)
    shuffled = list(range(n))
    random.Random(7).shuffle(shuffled)
    orders = {"ordered": list(range(n)), "shuffled": shuffled, "reversed": list(range(n))[::-1]}
    projects = {name: _record(f"determinism-{name}", order) for name, order in orders.items()}
    for query, budget in QUERIES:
        delivered = {}
        for name, (project, labels) in projects.items():
            compiler_cache_clear()  # each index built afresh, from its own rows
            delivered[name] = _delivered(project, labels, query, budget)
        reference = delivered["ordered"]
        assert reference[1], f"{query!r}: nothing delivered"
        for name, got in delivered.items():
            assert got == reference, f"{query!r} at {budget} tokens: {name} differs"


def test_tie_key_orders_by_valid_time_then_content_never_by_id():
    def doc(key: str, at: float, digest: str) -> MemoryDoc:
        return MemoryDoc(key=key, kind="episode", tokens=(), valid_from=at, digest=digest)

    older, newer = doc("episode:ep_z", 1.0, "aa"), doc("episode:ep_a", 2.0, "ff")
    low, high = doc("episode:ep_9", 1.0, "00"), doc("episode:ep_0", 1.0, "ab")
    assert sorted([older, newer, high, low], key=tie_key) == [newer, low, older, high]
    same = {"title": "t", "occurred_at": "2026-03-02T09:00:00+00:00"}
    assert content_digest(same) == content_digest(dict(reversed(same.items())))
