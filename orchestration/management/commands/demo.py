"""A guided tour of what the memory does, on a temporary database (migrated from scratch,
dropped afterwards): the configured database is never touched. Every step goes through the
same services the REST API and the MCP tools call."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit_app.findings import contradictions_audit
from graph_app.contracts.episodes import EpisodeRecordResult
from graph_app.contracts.facts import FactUpsertResult
from graph_app.delivery import context_deliver
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear
from graph_app.integrity import integrity_verify
from graph_app.time_travel import graph_as_of
from memoryproject.command_output import json_flag_add
from memoryproject.contracts import Caller
from memoryproject.models import Project
from memoryproject.scratch_db import temporary_database
from memoryproject.timeutil import utcnow
from sessions_app.plan import plan_context
from sessions_app.session_memory import session_load, session_save
from sessions_app.trace_writes import trace_record

PROJECT = "default"  # the project every migrated database starts with
CALLER = Caller(channel="cli", client="demo")
BUDGET = 160
SUMMARY = (
    "Active project: auth_service (repo acme/auth)\n"
    "Last decision: sign access tokens with PASETO v4 public keys, per MIG-12\n"
    "Current output: token rotation in src/auth/tokens.py, 18 tests passing\n"
    "Open questions: how long do HS256 tokens stay accepted after the cut-over?\n"
    "Key files: src/auth/tokens.py, src/auth/tests/test_tokens.py"
)

# The episodes the tour records about auth_service: the decision, the migration that replaces
# it, and an invariant the compiled bundle cites.
ADR: dict[str, Any] = {
    "category": "adr",
    "external_id": "ADR-7",
    "title": "Sign auth tokens with JWT HS256",
    "content": "One shared HS256 secret signs every access token; services verify locally.",
    "files_touched": ["src/auth/tokens.py"],
}
MIGRATION: dict[str, Any] = {
    "category": "migration",
    "external_id": "MIG-12",
    "title": "Move auth tokens to PASETO v4",
    "content": (
        "The shared HS256 secret leaked into three repositories. Tokens are now PASETO v4 "
        "public: the auth service signs, the others verify with its public key."
    ),
    "files_touched": ["src/auth/tokens.py", "src/auth/keys.py"],
}
INVARIANT: dict[str, Any] = {
    "category": "invariant",
    "external_id": "INV-3",
    "title": "Tokens never outlive their signing key",
    "content": "Rotating a key revokes every token it signed; verification checks the key id.",
    "files_touched": ["src/auth/keys.py"],
}


@dataclass
class Step:
    """One step of the tour: what it shows, its key figures and the lines it prints."""

    name: str
    title: str
    data: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, **self.data}


@dataclass
class Tour:
    project: Project
    now: datetime
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def adopted(self) -> datetime:
        return self.now - timedelta(days=120)

    @property
    def migrated(self) -> datetime:
        return self.now - timedelta(days=30)


def _short(value: str, keep: int = 16) -> str:
    return value if len(value) <= keep else value[:keep] + "…"


def _auth_episode(tour: Tour, at: datetime, **fields: Any) -> EpisodeRecordResult:
    """Records an episode about auth_service that occurred at ``at`` (``fields``: its category,
    external id, title, content and files touched, as in ``ADR``)."""
    return episode_record(
        project=tour.project, entities_mentioned=["auth_service"], occurred_at=at, **fields
    )


def _fact(
    tour: Tour, claim: tuple[str, str, str], at: datetime, source: str | None = None
) -> FactUpsertResult:
    """Asserts ``claim`` (subject, predicate, object value) from ``at``, cited to ``source``."""
    parts: dict[str, Any] = dict(
        zip(("subject_id", "predicate", "object_value"), claim, strict=True)
    )
    return fact_upsert(project=tour.project, valid_from=at, source_episode=source, **parts)


def step_adr(tour: Tour) -> Step:
    episode = _auth_episode(tour, tour.adopted, **ADR)
    fact = _fact(tour, ("auth_service", "uses_token_format", "JWT_HS256"), tour.adopted, episode.id)
    tour.state["first_fact"] = fact.fact.id
    return Step(
        "adr_episode",
        "An ADR episode and the fact it states",
        {"episode_id": episode.id, "external_id": "ADR-7", "fact_id": fact.fact.id},
        [
            f"episode {episode.id} [ADR:ADR-7] '{episode.title}' ({tour.adopted:%Y-%m-%d})",
            f"fact {fact.fact.id}: auth_service --(uses_token_format)--> JWT_HS256",
        ],
    )


def step_migration(tour: Tour) -> Step:
    episode = _auth_episode(tour, tour.migrated, **MIGRATION)
    fact = _fact(
        tour, ("auth_service", "uses_token_format", "PASETO_v4_public"), tour.migrated, episode.id
    )
    superseded = [f.id for f in fact.superseded]
    tour.state["second_fact"] = fact.fact.id
    return Step(
        "migration_supersedes",
        "A migration supersedes the fact (history kept, nothing deleted)",
        {
            "episode_id": episode.id,
            "fact_id": fact.fact.id,
            "outcome": fact.outcome,
            "superseded_ids": superseded,
        },
        [
            f"episode {episode.id} [MIGRATION:MIG-12] ({tour.migrated:%Y-%m-%d})",
            f"fact {fact.fact.id}: auth_service --(uses_token_format)--> PASETO_v4_public "
            f"(outcome {fact.outcome})",
            f"superseded: {', '.join(superseded) or 'none'} (closed at the migration, in history)",
        ],
    )


def step_time_travel(tour: Tour) -> Step:
    before_at = tour.migrated - timedelta(days=1)
    answers: dict[str, Any] = {}
    lines = []
    for label, at in (("before", before_at), ("after", tour.now)):
        result = graph_as_of(project=tour.project, as_of=at)
        values = [f.object_value for f in result.facts if f.predicate == "uses_token_format"]
        answers[label] = {
            "as_of": at.isoformat(),
            "token_format": values[0] if values else None,
            "facts": result.count,
            "snapshot_hash": result.snapshot_hash,
        }
        lines.append(
            f"as of {at:%Y-%m-%d} ({label} the migration): uses_token_format = "
            f"{answers[label]['token_format']}  snapshot {_short(result.snapshot_hash)}"
        )
    return Step(
        "time_travel", "Time travel: the graph before and after the migration", answers, lines
    )


def step_compile(tour: Tour) -> Step:
    _auth_episode(tour, tour.migrated + timedelta(days=2), **INVARIANT)
    result = context_deliver(
        project=tour.project, query="auth_service token format", max_tokens=BUDGET, caller=CALLER
    )
    return Step(
        "compile",
        f"A compiled context bundle under a {BUDGET}-token budget",
        {
            "max_tokens": result.max_tokens,
            "token_count": result.token_count,
            "citations": list(result.citations),
            "suppressed_stale": result.suppressed_stale,
            "injection_id": result.injection_id,
        },
        [
            f"{result.token_count} tokens of {result.max_tokens}; "
            f"{len(result.citations)} citations; {result.suppressed_stale} stale fact(s) left out;"
            f" receipt #{result.injection_id}",
            *("  | " + line for line in result.markdown.splitlines()),
        ],
    )


def step_integrity(tour: Tour) -> Step:
    result = integrity_verify(project=tour.project)
    return Step(
        "integrity",
        "Graph integrity: every hash recomputed, the change log chained",
        {
            "verified": result.verified,
            "records": result.records,
            "merkle_root": result.merkle_root,
            "chain_size": result.chain.size,
            "chain_head": result.chain.head,
        },
        [
            f"verified: {result.verified} ({result.facts} facts, {result.episodes} episodes, "
            f"{result.entities} entities)",
            f"Merkle root {result.merkle_root}",
            f"change log: {result.chain.size} entries, head {result.chain.head}",
        ],
    )


def step_contradiction(tour: Tour) -> Step:
    # Two agents named one relation two ways: the alias rule sees one claim contradict the other.
    older = _fact(tour, ("payment_ledger", "uses_currency_precision", "2_decimals"), tour.adopted)
    newer = _fact(tour, ("payment_ledger", "currency_precision", "4_decimals"), tour.migrated)
    found = contradictions_audit(project=tour.project, auto_resolve=False, caller=CALLER)
    resolved = contradictions_audit(project=tour.project, auto_resolve=True, caller=CALLER)
    finding = found.findings[0] if found.findings else None
    return Step(
        "contradiction",
        "A contradiction found, then resolved by supersession",
        {
            "found_open": found.open,
            "rule": finding.rule if finding else None,
            "fact_ids": list(finding.fact_ids) if finding else [],
            "kept": newer.fact.id,
            "retired": older.fact.id,
            "auto_resolved": resolved.auto_resolved,
            "open_after": resolved.open,
        },
        [
            f"payment_ledger: uses_currency_precision 2_decimals ({older.fact.id}) vs "
            f"currency_precision 4_decimals ({newer.fact.id})",
            f"audit: {found.open} open finding(s)"
            + (f", rule {finding.rule}: {finding.evidence}" if finding else ""),
            f"audit with auto_resolve: {resolved.auto_resolved} resolved, {resolved.open} open; "
            f"kept {newer.fact.id}, retired {older.fact.id} into history",
        ],
    )


def step_session(tour: Tour) -> Step:
    saved = session_save(project=tour.project, summary=SUMMARY)
    loaded = session_load(project=tour.project, threshold=0.45, caller=CALLER)
    prompt = loaded.system_prompt or ""
    return Step(
        "session",
        "A trust-scored session summary saved, then loaded by the next session",
        {
            "trace_id": saved.trace_id,
            "trust_score": saved.trust_score,
            "decision": saved.decision,
            "found": loaded.found,
            "injection_id": loaded.get("injection_id"),
        },
        [
            f"saved {saved.trace_id}: trust {saved.trust_score:.2f}, {saved.decision}",
            f"loaded: found={loaded.found}" + (f", {prompt.splitlines()[0]}" if prompt else ""),
        ],
    )


def step_flagged_plan(tour: Tour) -> Step:
    # A failed, vague trace: the next plan must not inject it.
    trace_record(
        project=tour.project,
        model="demo-model",
        policy="agent",
        status_code=500,
        last_decision="maybe retry something later?",
    )
    plan = plan_context(project=tour.project, n=1, caller=CALLER)
    return Step(
        "flagged_plan",
        "A plan from an untrustworthy trace is flagged, not injected",
        {
            "status": plan.status,
            "decision": plan.decision,
            "trust_score": plan.trust_score,
            "flagged_reason": plan.flagged_reason,
            "injection_id": plan.injection_id,
        },
        [
            f"status {plan.status}, decision {plan.decision}, trust {plan.trust_score:.2f}",
            f"reason: {plan.flagged_reason}",
        ],
    )


STEPS: tuple[Callable[[Tour], Step], ...] = (
    step_adr,
    step_migration,
    step_time_travel,
    step_compile,
    step_integrity,
    step_contradiction,
    step_session,
    step_flagged_plan,
)


class Command(BaseCommand):
    help = (
        "A guided tour on a temporary database (dropped afterwards; the configured database "
        "is never touched): ADR, supersession, time travel, a compiled bundle, integrity, a "
        "contradiction resolved, a session saved and loaded, a flagged plan."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        warnings.filterwarnings("ignore", "No directory at", UserWarning)
        started = time.perf_counter()
        # The compiler caches indexes per project key: the temporary project must not leave
        # its index behind for the configured database's project with the same key.
        compiler_cache_clear()
        try:
            with temporary_database("memory_demo") as name:
                tour = Tour(project=Project.objects.get(slug=PROJECT), now=utcnow())
                steps = [step(tour) for step in STEPS]
        finally:
            compiler_cache_clear()
        elapsed_ms = round((time.perf_counter() - started) * 1000.0, 1)
        result = {
            "database": "temporary",
            "database_name": name,
            "project": PROJECT,
            "steps": [s.as_json() for s in steps],
            "elapsed_ms": elapsed_ms,
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"memoryproject demo (temporary database {name}, dropped afterwards)\n")
        for number, step in enumerate(steps, 1):
            self.stdout.write(f"\n{number}. {step.title}")
            for line in step.lines:
                self.stdout.write(f"   {line}")
        self.stdout.write(f"\nDone in {elapsed_ms / 1000:.1f} s; nothing was kept.")
