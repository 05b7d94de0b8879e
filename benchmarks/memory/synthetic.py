"""The synthetic engineering memory the benchmarks load.

Generated with a fixed seed: services, modules and libraries as entities; facts with
supersession chains and dependency edges; ADRs, bug root causes, invariants, notes, migrations
and incidents as episodes. The corpus is bulk-loaded in one graph write (rows carry correctly
computed sha256 and revisions, and the change log seals each of them through the same canonical
builders, so integrity verification and the compiler's change feed see a consistent graph).
A corpus may be kept under a name that says its size and seed and loaded again by a later run
(building 100,000 facts takes minutes).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Min

from audit_app.models import AuditRun, ContradictionFinding, audit_maintenance
from graph_app.domain.records import episode_canonical, fact_canonical, sha256_of
from graph_app.graph_writes import GraphWrite, graph_write
from graph_app.index_cache import compiler_cache_forget
from graph_app.models import (
    ChangeAction,
    Entity,
    Episode,
    EpisodeCategory,
    EpisodeFile,
    GraphChange,
    RecordType,
    TemporalFact,
)
from graph_app.record_canonical import entity_sha256
from memoryproject.models import Project
from memoryproject.writes import write_transaction

# Draws a progress bar on stderr (stdout carries the results), only when it is a terminal.
Show = Callable[..., Iterable[Any]]
#: Queries, each with the ids of the stale facts it must not be shown.
Queries = list[tuple[str, list[str]]]


@dataclass(frozen=True)
class Scale:
    entities: int
    facts: int
    superseded: int
    episodes: int
    queries: int
    samples: int  # measured service calls per write/read operation
    integrity_runs: int

    @classmethod
    def of_facts(cls, facts: int) -> Scale:
        """A corpus of ``facts`` facts in the proportions of the named scales: one entity per 50
        facts, 30 % superseded, one episode per 10 facts."""
        for scale in SCALES.values():
            if scale.facts == facts:
                return scale
        return cls(
            entities=max(20, facts // 50),
            facts=facts,
            superseded=facts * 3 // 10,
            episodes=max(30, facts // 10),
            queries=50,
            samples=30,
            integrity_runs=1,
        )


def scale_parse(text: str) -> int:
    """A number of facts written ``1k``, ``250k``, ``1m`` or ``5000``."""
    value = text.strip().lower().replace("_", "")
    factor = {"k": 1_000, "m": 1_000_000}.get(value[-1:], 1)
    number = value[:-1] if factor > 1 else value
    if not number.isdigit() or int(number) * factor < 100:
        raise ValueError(f"scale {text!r}: a number of facts of at least 100 (1k, 250k, 1m)")
    return int(number) * factor


def scale_label(facts: int) -> str:
    if facts % 1_000_000 == 0:
        return f"{facts // 1_000_000}m"
    return f"{facts // 1000}k" if facts % 1000 == 0 else str(facts)


SCALES = {
    "small": Scale(entities=20, facts=120, superseded=30, episodes=30, queries=12, samples=10, integrity_runs=2),
    "cortex": Scale(entities=60, facts=500, superseded=150, episodes=100, queries=50, samples=50, integrity_runs=5),
    "100k": Scale(entities=2_000, facts=100_000, superseded=30_000, episodes=10_000, queries=50, samples=50, integrity_runs=1),
}  # fmt: skip
BUDGET = 800

AREAS = [
    "auth", "order", "payment", "billing", "invoice", "user", "session", "catalog", "search",
    "inventory", "shipping", "notification", "ledger", "report", "export", "pricing", "cart",
    "refund", "audit", "webhook",
]  # fmt: skip
KINDS = [
    ("service", "service"), ("repository", "module"), ("worker", "service"), ("api", "service"),
    ("client", "library"), ("store", "module"), ("scheduler", "service"), ("adapter", "module"),
    ("handler", "module"), ("cache", "module"),
]  # fmt: skip
SINGULAR = {
    "uses_token_format": ["JWT_HS256", "JWT_RS256", "PASETO_v4_public", "opaque_session_token"],
    "stores_data_in": ["postgres_15", "postgres_16", "redis_7", "s3_bucket", "sqlite_wal"],
    "deployed_to": ["eu-west-1", "us-east-1", "on_prem_k8s", "fly_io"],
    "owned_by": ["team_core", "team_payments", "team_growth", "team_platform"],
    "max_retries": ["3", "5", "8", "0"],
    "timeout_ms": ["250", "500", "1000", "3000"],
    "serialization_format": ["json", "msgpack", "protobuf_v3", "avro"],
    "log_level": ["INFO", "WARNING", "DEBUG"],
}
EDGES = ["depends_on", "calls", "publishes_to", "reads_from"]
CATEGORIES = list(EpisodeCategory.values)
EPISODE_TEMPLATES = {
    "adr": (
        "ADR: {a} switches {p} to {v}",
        "We decided that {a} uses {v} for {p} because the old choice broke under load in {b}. "
        "Consequences: {b} must be redeployed; the change is covered by tests in {f}.",
    ),
    "bug_root_cause": (
        "Root cause: {a} dropped requests to {b}",
        "A race between {a} and {b} lost writes when retries overlapped. The root cause was a "
        "missing idempotency key in {f}; fixed by keying on the request id.",
    ),
    "invariant": (
        "Invariant: {a} never writes without {b}",
        "{a} must call {b} inside the same transaction; balances never go negative and every "
        "write is idempotent. Checked in {f}.",
    ),
    "session_note": (
        "Notes on {a}",
        "Paired on {a}: renamed helpers, read {f}, found that {b} caches results for 30 seconds.",
    ),
    "migration": (
        "Migration: move {a} from {v} to a new schema",
        "Backfilled the {a} tables in batches of 5000, then switched reads; {b} was paused "
        "during the cut-over. Script in {f}.",
    ),
    "incident": (
        "Incident: {a} outage",
        "{a} returned 500s for 14 minutes after {b} exhausted its connection pool. Mitigated by "
        "raising the pool size; follow-up in {f}.",
    ),
}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return (time.perf_counter() - start) * 1000, result


class Corpus:
    """The synthetic memory: plans rows in Python, then bulk-inserts them in one transaction
    that holds the project's graph revision, like a service write."""

    def __init__(self, project: Project, scale: Scale, rng: random.Random) -> None:
        self.project, self.scale, self.rng = project, scale, rng
        # Ids are unique across the database (several corpora may be kept side by side): drawn
        # apart from the content, from the project's name.
        self.ids = random.Random(project.slug)
        self.base = datetime(2025, 1, 1, tzinfo=UTC)
        self.entities: list[str] = []
        # subject, predicate, fact ids (old -> new)
        self.chains: list[tuple[str, str, list[str]]] = []
        self.episode_ids: list[str] = []

    def _entity_names(self) -> list[str]:
        names: list[str] = []
        combos = [(a, k) for a in AREAS for k in KINDS]
        i = 0
        while len(names) < self.scale.entities:
            area, (kind, _) = combos[i % len(combos)]
            suffix = f"_{i // len(combos)}" if i >= len(combos) else ""
            names.append(f"{area}_{kind}{suffix}")
            i += 1
        return names

    def load(self, show: Show) -> None:
        with graph_write(self.project) as write:
            ids = self._entities_load(write)
            self._episodes_load(ids, write, show)
            chains = self._chain_plans()
            edges = self._edge_plans(self.scale.facts - len(chains))
            self._facts_load(ids, chains + edges, write, show)

    def read_back(self, chains: int) -> None:
        """What the queries need, read from the stored graph (a kept corpus is loaded again
        this way): the entities in creation order and ``chains`` supersession chains (a subject
        and a singular predicate with several facts), in the order of their first fact's
        random id."""
        project = self.project
        self.entities = list(
            Entity.objects.filter(project=project).order_by("id").values_list("slug", flat=True)
        )
        pairs = (
            TemporalFact.objects.filter(project=project, singular=True)
            .values("subject__slug", "predicate")
            .annotate(n=Count("id"), first=Min("id"))
            .filter(n__gt=1)
            .order_by("first")[:chains]
        )
        self.chains = []
        for pair in pairs:
            ids = TemporalFact.objects.filter(
                project=project, subject__slug=pair["subject__slug"], predicate=pair["predicate"]
            ).order_by("valid_from", "recorded_at", "id")
            chain = [str(i) for i in ids.values_list("id", flat=True)]
            self.chains.append((pair["subject__slug"], pair["predicate"], chain))

    def _entities_load(self, write: GraphWrite) -> dict[str, int]:
        """Creates the entities; answers their primary keys by slug."""
        kinds = {f"{a}_{k}": kind for a in AREAS for k, kind in KINDS}
        self.entities = self._entity_names()
        entities = [
            Entity(
                project=self.project,
                slug=n,
                kind=kinds.get(n.rsplit("_", 1)[0], "module")
                if n[-1].isdigit()
                else kinds.get(n, "module"),
                name=n,
                created_at=write.now,
            )
            for n in self.entities
        ]
        Entity.objects.bulk_create(entities, batch_size=2000)
        for entity in entities:
            sha256 = entity_sha256(entity, self.project)
            write.append(ChangeAction.CREATED, RecordType.ENTITY, entity.slug, sha256)
        return dict(Entity.objects.filter(project=self.project).values_list("slug", "id"))

    def _episode(self, i: int, revision: int) -> Episode:
        category = CATEGORIES[i % len(CATEGORIES)]
        a, b = self.rng.sample(self.entities, 2)
        path = f"src/{a.split('_')[0]}/{a}.py"
        value = self.rng.choice(SINGULAR["stores_data_in"])
        title_t, content_t = EPISODE_TEMPLATES[category]
        words = {"a": a, "b": b, "f": path, "p": "storage", "v": value}
        occurred = self.base + timedelta(hours=3 * i)
        # The canonical form's fields are the model's: one dict serves both.
        fields: dict[str, Any] = {
            "id": f"ep_{self.ids.getrandbits(64):016x}",
            "category": category,
            "title": title_t.format(**words),
            "content": content_t.format(**words),
            "files_touched": [path],
            "entities_mentioned": [a, b],
            "metadata": {},
            "occurred_at": occurred,
            "recorded_at": occurred,
            "external_id": None,
        }
        sha256 = sha256_of(episode_canonical(project=self.project.slug, **fields))
        return Episode(project=self.project, revision=revision, sha256=sha256, **fields)

    def _episodes_load(self, ids: dict[str, int], write: GraphWrite, show: Show) -> None:
        count = self.scale.episodes
        episodes = [self._episode(i, write.revision) for i in show(range(count), desc="episodes")]
        Episode.objects.bulk_create(episodes, batch_size=2000)
        for episode in episodes:
            write.append(ChangeAction.RECORDED, RecordType.EPISODE, episode.id, episode.sha256)
        EpisodeFile.objects.bulk_create(
            [EpisodeFile(episode=e, path=e.files_touched[0]) for e in episodes], batch_size=5000
        )
        through = Episode.entities.through
        through.objects.bulk_create(
            [
                through(episode_id=e.id, entity_id=ids[slug])
                for e in episodes
                for slug in e.entities_mentioned
            ],
            batch_size=5000,
            ignore_conflicts=True,
        )
        self.episode_ids = [e.id for e in episodes]

    def _chain_plans(self) -> list[dict[str, Any]]:
        """Supersession chains on singular predicates until the superseded quota is met, then
        one-fact chains. Each plan holds the arguments of ``fact_canonical`` but the project
        and the confidence (always 1.0)."""
        rng, plans = self.rng, []
        remaining_superseded = self.scale.superseded
        pairs = [(s, p) for s in self.entities for p in SINGULAR]
        rng.shuffle(pairs)
        edge_quota = (self.scale.facts - self.scale.superseded) // 3
        singles_quota = self.scale.facts - self.scale.superseded - edge_quota
        for subject, predicate in pairs:
            if remaining_superseded <= 0 and singles_quota <= 0:
                break
            length = 1
            if remaining_superseded > 0:
                length = min(remaining_superseded, rng.randint(1, 4)) + 1
                remaining_superseded -= length - 1
            singles_quota -= 1
            values = [
                rng.choice(SINGULAR[predicate]) + (f"_r{k}" if k else "") for k in range(length)
            ]
            start = self.base + timedelta(days=rng.randint(0, 200))
            chain_ids = [f"fact_{self.ids.getrandbits(64):016x}" for _ in range(length)]
            for k in range(length):
                closed = k < length - 1
                end = start + timedelta(days=30 * (k + 1)) if closed else None
                plans.append(
                    {
                        "id": chain_ids[k],
                        "subject": subject,
                        "predicate": predicate,
                        "object_value": values[k],
                        "object_entity": None,
                        "singular": True,
                        "valid_from": start + timedelta(days=30 * k),
                        "valid_until": end,
                        "recorded_at": start + timedelta(days=30 * k),
                        "closed_at": end,
                        "superseded_by": chain_ids[k + 1] if closed else None,
                        "source_episode": rng.choice(self.episode_ids) if self.episode_ids and rng.random() < 0.3 else None,
                    }
                )  # fmt: skip
            if length > 1:
                self.chains.append((subject, predicate, chain_ids))
        return plans

    def _edge_plans(self, count: int) -> list[dict[str, Any]]:
        """``count`` dependency edges: non-singular facts whose object is an entity."""
        rng, plans = self.rng, []
        for _ in range(count):
            subject, target = rng.sample(self.entities, 2)
            when = self.base + timedelta(days=rng.randint(0, 300))
            plans.append(
                {
                    "id": f"fact_{self.ids.getrandbits(64):016x}",
                    "subject": subject,
                    "predicate": rng.choice(EDGES),
                    "object_value": target,
                    "object_entity": target,
                    "singular": False,
                    "valid_from": when,
                    "valid_until": None,
                    "recorded_at": when,
                    "closed_at": None,
                    "superseded_by": None,
                    "source_episode": None,
                }
            )
        return plans

    def _facts_load(
        self, ids: dict[str, int], plans: list[dict[str, Any]], write: GraphWrite, show: Show
    ) -> None:
        rows = [
            TemporalFact(
                id=plan["id"],
                project=self.project,
                subject_id=ids[plan["subject"]],
                predicate=plan["predicate"],
                object_value=plan["object_value"],
                object_entity_id=ids[plan["object_entity"]] if plan["object_entity"] else None,
                singular=plan["singular"],
                confidence=1.0,
                valid_from=plan["valid_from"],
                valid_until=plan["valid_until"],
                recorded_at=plan["recorded_at"],
                closed_at=plan["closed_at"],
                superseded_by_id=plan["superseded_by"],
                source_episode_id=plan["source_episode"],
                revision=write.revision,
                sha256=sha256_of(fact_canonical(project=self.project.slug, confidence=1.0, **plan)),
            )
            for plan in show(plans, desc="facts")
        ]
        # Successors after their predecessors: the superseded_by key is checked at commit.
        TemporalFact.objects.bulk_create(rows, batch_size=2000)
        for fact in rows:
            write.append(ChangeAction.ASSERTED, RecordType.FACT, fact.id, fact.sha256)


def project_drop(project: Project) -> None:
    compiler_cache_forget(project.pk)
    with write_transaction():
        ContradictionFinding.objects.filter(project=project).delete()
        AuditRun.objects.filter(project=project).delete()
        TemporalFact.objects.filter(project=project).update(superseded_by=None)
        TemporalFact.objects.filter(project=project).delete()
        EpisodeFile.objects.filter(episode__project=project).delete()
        Episode.entities.through.objects.filter(episode__project=project).delete()
        Episode.objects.filter(project=project).delete()
        Entity.objects.filter(project=project).delete()
        # A scratch project's change log goes with it (the one maintenance the gate is for).
        with audit_maintenance():
            GraphChange.objects.filter(project=project).delete()
        project.delete()


def queries_for(corpus: Corpus, count: int, rng: random.Random) -> Queries:
    """Half aim at a supersession chain (subject + predicate; its closed facts are the stale
    ids), the rest are the kind of question an agent asks before a task."""
    queries: Queries = []
    for i in range(count):
        if i % 2 == 0 and corpus.chains:
            subject, predicate, chain = corpus.chains[(i // 2) % len(corpus.chains)]
            queries.append((f"{subject} {predicate.replace('_', ' ')}", chain[:-1]))
        else:
            a = rng.choice(corpus.entities)
            question = rng.choice(
                [
                    f"invariants of {a} before changing it",
                    f"why did {a} fail in production",
                    f"what does {a} depend on",
                    f"migration plan for {a} storage",
                ]
            )
            queries.append((question, []))
    return queries
