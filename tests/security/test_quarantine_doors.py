"""Flagged memory never reaches an agent, through any door; every delivered item is spotlighted.

For each injection family of the screening corpus (its tune split) a probe is recorded the way
an attacker with a write key would place it: as the newest trace's decision, in a saved
summary, as an episode and as a fact. Every door that delivers memory is then read, over REST
and over MCP (``tests/mcp/test_quarantine_doors.py``): plan (auto and force), session load, compile, the record reads (entity, episode,
fact, time travel), the resources and the prompts. The probe's text must appear in none of
their answers (text and JSON), the flagged items must be named in a quarantine mark, and the
clean memory beside them must still be delivered, between the spotlight marks. Secrets of
every form of the corpus go the same way: none is answered in clear by any door.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from benchmarks.screening.corpus import corpus_load
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from memoryproject.domain.screening import INSTRUCTION_RULES, record_screen
from memoryproject.domain.spotlight import OPEN, QUARANTINE_HEADING
from memoryproject.models import Project
from sessions_app.trace_writes import trace_record

CORPUS = corpus_load("tune")
FAMILIES = sorted({p.family for p in CORPUS.probes})
CLEAN_DECISION = "Keep the ledger in PostgreSQL with one schema per tenant."
SUMMARY = """## Active project
ledger service
## Last decision
{decision}
## Current output
The ledger migration script.
## Open questions
- Should tenants share a connection pool?
## Key files
- ledger/migrate.py
"""


def _probe(family: str) -> str:
    """The family's first probe that screening flags as written."""
    for probe in CORPUS.probes:
        if probe.family == family and record_screen({"content": probe.text}).flagged:
            return probe.text
    raise AssertionError(f"no probe of {family} is flagged: the corpus and screening disagree")


def _fragments(text: str) -> list[str]:
    """Pieces of ``text`` that would show it was delivered: each run of 24 characters of
    its words, whitespace collapsed (an episode line collapses it too)."""
    flat = " ".join(text.split())
    return [flat[i : i + 24] for i in range(0, max(1, len(flat) - 23), 12)]


#: The rules' own names, which a quarantine line shows (never the probe's words).
RULE_NAMES = sorted({rule.rule for rule in INSTRUCTION_RULES}, key=len, reverse=True)


def _leaks(answers: Iterable[str], texts: Iterable[str]) -> list[str]:
    flat = [" ".join(a.split()) for a in answers]
    for name in RULE_NAMES:
        flat = [a.replace(name, "") for a in flat]
    return [piece for text in texts for piece in _fragments(text) if any(piece in a for a in flat)]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _plant(project: Project, probes: list[str]) -> dict[str, list[str]]:
    """For each probe a poisoned trace, episode and fact, and clean memory beside them (the
    newest trace among it); answers the ids of the poisoned items by kind."""
    episode_record(
        project=project,
        title="Ledger tenancy decision",
        category="adr",
        content="The ledger keeps one PostgreSQL schema per tenant.",
    )
    ids: dict[str, list[str]] = {"trace": [], "episode": [], "fact": []}
    for n, probe in enumerate(probes):
        trace = trace_record(project=project, model="claude", metadata={"last_decision": probe})
        ids["trace"].append(trace["trace_id"])
        episode = episode_record(
            project=project,
            title=f"Ledger note {n}",
            category="session_note",
            content=f"Ledger tenancy. {probe}",
            entities_mentioned=["ledger"],
        )
        ids["episode"].append(episode["id"])
        fact = fact_upsert(
            project=project,
            subject_id="ledger",
            predicate=f"note_{n}",
            object_value=probe,
            singular=False,
        )
        ids["fact"].append(fact["fact"]["id"])
    # The newest trace is clean: a plan reads the most recent ones.
    trace_record(
        project=project,
        model="claude",
        metadata={
            "active_project": "ledger service",
            "last_decision": CLEAN_DECISION,
            "current_output": "the ledger migration script",
        },
    )
    return ids


# --- REST -------------------------------------------------------------------------------------


def _rest_answers(api, ids: dict[str, list[str]]) -> dict[str, str]:
    answers = {
        "plan auto": api.post("/v1/plan", {"mode": "auto"}, format="json").json(),
        "plan force": api.post("/v1/plan", {"mode": "force"}, format="json").json(),
        "load": api.get("/v1/sessions/load").json(),
        "compile": api.post(
            "/v1/graph/compile", {"query": "ledger tenancy note"}, format="json"
        ).json(),
        "entity": api.get("/v1/graph/entities/ledger").json(),
        "time travel": api.get("/v1/graph/time-travel", {"as_of": "2999-01-01T00:00:00Z"}).json(),
    }
    for episode_id in ids["episode"]:
        answers[f"episode {episode_id}"] = api.get(f"/v1/graph/episodes/{episode_id}").json()
    for fact_id in ids["fact"]:
        answers[f"fact {fact_id}"] = api.get(f"/v1/graph/facts/{fact_id}").json()
    return {door: _json(body) for door, body in answers.items()}


@pytest.mark.django_db
@pytest.mark.parametrize("family", FAMILIES)
def test_rest_doors_deliver_no_probe_of_the_family(api, default_project, family):
    probe = _probe(family)
    ids = _plant(default_project, [probe])
    api.post("/v1/sessions/save", {"summary": SUMMARY.format(decision=probe)}, format="json")
    answers = _rest_answers(api, ids)
    leaks = {door: _leaks([text], [probe]) for door, text in answers.items()}
    assert not any(leaks.values()), {door: found for door, found in leaks.items() if found}

    plan = json.loads(answers["plan force"])
    assert plan["status"] == "injected"
    assert f"{OPEN}{CLEAN_DECISION}" in plan["system_prompt"]  # clean memory, spotlighted
    assert QUARANTINE_HEADING in plan["system_prompt"]
    assert ids["trace"][0] in {q["id"] for q in plan["quarantined"]}
    compiled = json.loads(answers["compile"])
    held = {(q["kind"], q["id"]) for q in compiled["quarantined"]}
    assert ("episode", ids["episode"][0]) in held
    assert any(item["citation"].startswith("[ADR:") for item in compiled["items"])
    loaded = json.loads(answers["load"])
    assert loaded["found"] is False and loaded["rule"] in ("flagged", "threshold")
    episode = json.loads(answers[f"episode {ids['episode'][0]}"])
    assert episode["quarantined"] and episode["content"].startswith("[quarantined")
    fact = json.loads(answers[f"fact {ids['fact'][0]}"])
    assert fact["quarantined"]


@pytest.mark.django_db
def test_rest_doors_answer_no_secret_of_any_form(api, default_project):
    secrets = list(CORPUS.secrets)
    for n, secret in enumerate(secrets):
        trace_record(
            project=default_project,
            metadata={"last_decision": secret.text, "current_output": f"step {n}"},
        )
        episode_record(
            project=default_project,
            title=f"Ledger credentials {n}",
            category="incident",
            content=f"Ledger tenancy. {secret.text}",
        )
    api.post(
        "/v1/sessions/save",
        {"summary": SUMMARY.format(decision=secrets[0].text)},
        format="json",
    )
    answers = _rest_answers(api, {"episode": [], "fact": []})
    for secret in secrets:
        found = [door for door, text in answers.items() if secret.secret in text]
        assert not found, f"{secret.form} answered in clear by {found}"
