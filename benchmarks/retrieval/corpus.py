"""A seeded engineering memory with questions and gold citations, to measure retrieval.

Shaped like the memory coding agents keep about a codebase: services and modules named in
snake_case and CamelCase, each with dependencies written the way agents write them (relational
predicates, and Cortex-style facts whose object value is another entity's id), configuration
facts that a later migration supersedes, a change scheduled for the future, ADRs, bug root
causes naming functions and files, invariants (some listing their entity, some only naming it
in the text) and a crowd of session notes that use the same words as the questions.

Questions come in kinds, each with the records that answer it (by symbolic reference, resolved
to ids once loaded):

- ``fact``: a current configuration value; ``identifier``: a function named in a bug;
  ``path``: a file; ``adr``: why a decision was made; ``bug``: a symptom;
- ``two_hop``: what to know before changing how a service calls its dependencies: the
  invariants of the entities one and two edges away, which the question never names;
- ``since``: what changed about a service since a day; ``time_travel``: a value as it was then
  (compiled ``as_of`` that day).

Pure Python: no Django import. ``evaluate.py`` (``manage.py memory_eval``) loads it through
the services and runs the questions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

AREAS = [
    "order", "payment", "billing", "invoice", "auth", "session", "catalog", "search",
    "inventory", "shipping", "notification", "ledger", "pricing", "cart", "refund", "webhook",
]  # fmt: skip
SNAKE_KINDS = ["service", "repository", "worker", "store", "scheduler"]
CAMEL_KINDS = ["Client", "Gateway", "Adapter", "Writer"]
NOISE = [
    "Paired on the {a} call path; renamed helpers and changed how it logs its dependencies.",
    "Before changing anything, read the dependencies list in {f}; the calls there are noisy.",
    "Reviewed how {a} calls things; nothing must change before the release, said the team.",
    "Looked at the dependency graph of {a}: what we must know is in the wiki, not here.",
    "Changed the retry logging of {a}; calls to its dependencies now carry a request id.",
]
BASE = datetime(2026, 1, 5, tzinfo=UTC)


@dataclass(frozen=True)
class FactWrite:
    ref: str
    subject: str
    predicate: str
    value: str
    valid_from: datetime
    singular: bool = True


@dataclass(frozen=True)
class EpisodeWrite:
    external_id: str
    category: str
    title: str
    content: str
    occurred_at: datetime
    files: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    kind: str
    query: str
    gold: tuple[str, ...]  # external ids of episodes, ``fact:<ref>`` of facts
    as_of: datetime | None = None


@dataclass
class Corpus:
    """Writes in the order they are made, the questions, and which fact refs are not valid at
    the question's instant (superseded by then, or not yet valid)."""

    facts: list[FactWrite] = field(default_factory=list)
    episodes: list[EpisodeWrite] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    # fact ref -> (valid_from, valid_until or None)
    validity: dict[str, tuple[datetime, datetime | None]] = field(default_factory=dict)


def _names(rng: random.Random, count: int) -> list[str]:
    """Entity ids; areas repeat (``order_service`` beside ``OrderGateway``), as in a real
    codebase where names share words."""
    names: list[str] = []
    areas = rng.sample(AREAS, max(2, (count * 2) // 3))
    for i in range(count):
        area, repeat = areas[i % len(areas)], i // len(areas)
        if i % 3 == 2:
            names.append(area.capitalize() + CAMEL_KINDS[repeat % len(CAMEL_KINDS)])
        else:
            names.append(f"{area}_{SNAKE_KINDS[repeat % len(SNAKE_KINDS)]}")
    return names


def _path(name: str) -> str:
    return f"src/{name.lower()}/core.py"


def generate(*, seed: int = 7, services: int = 12, noise_per_service: int = 4) -> Corpus:
    """The corpus for ``seed``: ``services`` entities in dependency chains, their facts and
    episodes, ``noise_per_service`` notes each, and the questions."""
    rng = random.Random(seed)
    names = _names(rng, services)
    corpus = Corpus()
    deps = _dependencies(corpus, names)
    for i, name in enumerate(names):
        _service_memory(corpus, rng, i, name)
    for i, name in enumerate(names):
        for k in range(noise_per_service):
            template = NOISE[(i + k) % len(NOISE)]
            corpus.episodes.append(
                EpisodeWrite(
                    external_id=f"NOTE-{i}-{k}",
                    category="session_note",
                    title=f"Notes on {name}",
                    content=template.format(a=name, f=_path(name)),
                    occurred_at=BASE + timedelta(days=10 + 3 * k, hours=i),
                    files=(_path(name),),
                    entities=(name,),
                )
            )
    _two_hop_questions(corpus, names, deps)
    return corpus


def _dependencies(corpus: Corpus, names: list[str]) -> dict[str, list[str]]:
    """Chains a -> b -> c written three ways: a relational predicate, a CamelCase callee, and
    a Cortex-style fact whose object value is an entity id (written after that entity exists)."""
    deps: dict[str, list[str]] = {name: [] for name in names}
    for i, name in enumerate(names):
        for step, predicate in ((1, "depends_on"), (2, "calls")):
            j = i + step
            if j < len(names) and (i % 4 != 3 or step == 1):
                deps[name].append(names[j])
                corpus.facts.append(
                    FactWrite(
                        ref=f"edge-{i}-{j}",
                        subject=name,
                        predicate=predicate,
                        value=names[j],
                        valid_from=BASE,
                        singular=False,
                    )
                )
    return deps


def _service_memory(corpus: Corpus, rng: random.Random, i: int, name: str) -> None:
    """One service's facts (a superseded value, a scheduled one), ADR, bug and invariant."""
    path = _path(name)
    old, new = rng.choice([(3, 5), (2, 6), (5, 8)])
    migrated = BASE + timedelta(days=60 + i)
    facts = [
        FactWrite(f"timeout-{i}", name, "timeout_ms", str(250 * (1 + i % 4)), BASE),
        FactWrite(f"retries-old-{i}", name, "max_retries", str(old), BASE),
        FactWrite(f"retries-new-{i}", name, "max_retries", str(new), migrated),
        FactWrite(f"owner-{i}", name, "owned_by", f"team_{['core', 'payments', 'growth'][i % 3]}", BASE),
        FactWrite(f"region-{i}", name, "deployed_to", "eu-west-1", BASE),
        FactWrite(f"region-next-{i}", name, "deployed_to", "eu-central-1", datetime(2099, 1, 1, tzinfo=UTC)),
    ]  # fmt: skip
    corpus.facts.extend(facts)
    corpus.validity.update(
        {
            f"timeout-{i}": (BASE, None),
            f"retries-old-{i}": (BASE, migrated),
            f"retries-new-{i}": (migrated, None),
            f"owner-{i}": (BASE, None),
            f"region-{i}": (BASE, datetime(2099, 1, 1, tzinfo=UTC)),
            f"region-next-{i}": (datetime(2099, 1, 1, tzinfo=UTC), None),
        }
    )
    func = f"{name.replace('_', ' ').title().replace(' ', '')}.flush_batch"
    symptom = rng.choice(["duplicate", "lost", "stale", "reordered"])
    store = rng.choice(["postgres_16", "redis_7", "s3_bucket"])
    corpus.episodes += [
        EpisodeWrite(
            f"ADR-{i:03d}", "adr", f"{name} keeps its state in {store}",
            f"We chose {store} for {name} because its write pattern is append-mostly and "
            f"reads need point lookups. Alternatives weighed: a shared cache, a queue.",
            BASE + timedelta(days=5 + i), (path,), (name,),
        ),
        EpisodeWrite(
            f"BUG-{i:03d}", "bug_root_cause", f"{symptom} records after a retry in {name}",
            f"Root cause: {func} re-sent a batch when the ack timed out, so consumers saw "
            f"{symptom} records. Fixed by keying each batch on its sequence number.",
            BASE + timedelta(days=20 + i), (path,), (name,),
        ),
        EpisodeWrite(
            f"INV-{i:03d}", "invariant", f"Invariant of {name}",
            f"{name} must process each request exactly once and in order of arrival; "
            f"a batch is never acknowledged before it is durable.",
            BASE + timedelta(days=30 + i), (),
            # Half the invariants list their entity; the others only name it in the text.
            (name,) if i % 2 == 0 else (),
        ),
        EpisodeWrite(
            f"MIG-{i:03d}", "migration", f"Raise max_retries of {name} to {new}",
            f"Migration: max_retries of {name} goes from {old} to {new} after the spike of "
            f"timeouts; the old value stays in history.",
            migrated, (path,), (name,),
        ),
    ]  # fmt: skip
    since = migrated - timedelta(days=3)
    corpus.questions += [
        Question("fact", f"what is the timeout_ms of {name}?", (f"fact:timeout-{i}",)),
        Question("fact", f"how many times does {name} retry?", (f"fact:retries-new-{i}",)),
        Question("identifier", f"where is {func} fixed?", (f"BUG-{i:03d}",)),
        Question("path", f"what do we know about {path}", (f"ADR-{i:03d}", f"BUG-{i:03d}")),
        Question("adr", f"why was {store} chosen for {name}?", (f"ADR-{i:03d}",)),
        Question("bug", f"consumers of {name} saw {symptom} records: known cause?", (f"BUG-{i:03d}",)),
        Question(
            "since", f"what changed in {name} since {since.date().isoformat()}?",
            (f"MIG-{i:03d}", f"fact:retries-new-{i}"),
        ),
        Question(
            "time_travel", f"what was the max_retries of {name}?",
            (f"fact:retries-old-{i}",), as_of=BASE + timedelta(days=30),
        ),
    ]  # fmt: skip


def _two_hop_questions(corpus: Corpus, names: list[str], deps: dict[str, list[str]]) -> None:
    """For each service with dependencies: the invariants of what it reaches in one or two
    edges, asked without naming them."""
    index = {name: i for i, name in enumerate(names)}
    for name in names:
        reached: list[str] = []
        for first in deps[name]:
            for node in [first, *deps[first]]:
                if node != name and node not in reached:
                    reached.append(node)
        if not reached:
            continue
        gold = tuple(f"INV-{index[node]:03d}" for node in reached)
        corpus.questions.append(
            Question(
                "two_hop",
                f"what must I know before changing how {name} calls its dependencies?",
                gold,
            )
        )


def stale_refs(corpus: Corpus, at: datetime) -> set[str]:
    """The fact refs not valid at ``at``: superseded by then, or not valid yet."""
    return {
        ref
        for ref, (start, end) in corpus.validity.items()
        if start > at or (end is not None and end <= at)
    }
