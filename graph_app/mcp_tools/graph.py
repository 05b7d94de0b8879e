"""The knowledge graph over MCP: the memory_* tools that write and read facts, episodes and
entities, and the graph resources.

Each tool is built from the same operation as its REST twin (graph_app.operations): same
arguments, errors and structured answer; the functions here only say what the tool is for and
render its answer as text.
"""

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from graph_app import graph_summary, integrity, record_views
from graph_app.contracts.entities import EntityQueryResult
from graph_app.contracts.episodes import EpisodeOut, EpisodeRecordResult
from graph_app.contracts.facts import FactOut, FactRetractResult, FactUpsertResult
from graph_app.contracts.integrity import IntegrityResult
from graph_app.contracts.time_travel import TimeTravelResult
from graph_app.operations import (
    ENTITY_QUERY,
    EPISODE_GET,
    EPISODE_RECORD,
    FACT_GET,
    FACT_RETRACT,
    FACT_UPSERT,
    INTEGRITY_VERIFY,
    TIME_TRAVEL,
)
from memoryproject.contracts import Output
from memoryproject.domain.spotlight import PREAMBLE, PREAMBLE_LINE, Quarantined, quarantine_line
from memoryproject.domain.spotlight import data as spotlight
from memoryproject.mcp_calls import (
    DESTRUCTIVE,
    IDEMPOTENT_WRITE,
    READ,
    WRITE,
    McpRegistry,
    ToolHints,
    add_tool,
)
from memoryproject.operations import Operation

RECENT_EPISODES = 20
EPISODE_PREVIEW_CHARS = 2000

UPSERT_HEADS = {
    "active": "Fact recorded as the current truth",
    "history": "Fact recorded as history (it starts before the current one)",
    "unchanged": "Identical to the active fact; nothing changed",
}


def _held(kind: str, item_id: str, reasons: list[str]) -> str:
    """A quarantined item as a read shows it: the label first, never its text."""
    return quarantine_line(Quarantined(kind, item_id, tuple(reasons)))[2:]


def _fact_line(fact: FactOut) -> str:
    if fact.quarantined:
        return _held("fact", fact.id, fact.quarantined)
    data = fact.as_json()
    span = f"valid {data['valid_from']} .. {data['valid_until'] or 'now'}"
    recorded = spotlight(f"{fact.subject} --({fact.predicate})--> {fact.object_value}")
    return f"[{fact.id}] {recorded} ({fact.status}, {span})"


def _episode_head(episode: EpisodeOut) -> str:
    if episode.quarantined:
        return _held("episode", episode.id, episode.quarantined)
    return f"[{episode.id}] {episode.category}: {spotlight(episode.title)}"


def render_episode(data: EpisodeRecordResult) -> str:
    verb = "recorded" if data.created else "already recorded (same external_id)"
    return f"Episode {verb}: {_episode_head(data)}\nsha256={data.sha256}"


def render_fact(data: FactUpsertResult) -> str:
    lines = [f"{UPSERT_HEADS[data.outcome]}:", _fact_line(data.fact)]
    lines += ["Superseded: " + _fact_line(old) for old in data.superseded]
    return "\n".join(lines)


def render_retract(data: FactRetractResult) -> str:
    return "Fact retracted: " + _fact_line(data.fact)


def render_entity(data: EntityQueryResult) -> str:
    entity, ego = data.entity, data.ego_graph
    lines = [
        f"Entity {spotlight(entity.id)} ({entity.kind or 'unknown kind'}; {PREAMBLE})",
        "Facts:",
    ]
    lines += [f"- {_fact_line(f)}" for f in data.facts] or ["- (none)"]
    if data.history:
        lines += ["History:", *(f"- {_fact_line(f)}" for f in data.history)]
    if data.episodes:
        lines += ["Episodes:", *(f"- {_episode_head(e)}" for e in data.episodes)]
    nodes = ", ".join(f"{spotlight(n.id)}({n.hops})" for n in ego.nodes)
    lines.append(f"Ego graph within {ego.max_hops} hops: {nodes}")
    lines += [
        f"- {spotlight(f'{e.source} --({e.predicate})--> {e.target}')} [{e.fact_id}]"
        for e in ego.edges
    ]
    return "\n".join(lines)


def render_time_travel(data: TimeTravelResult) -> str:
    head = data.as_json()
    lines = [
        f"{data.count} fact(s) valid at {head['as_of']} as known at {head['known_at']} "
        f"(snapshot {data.snapshot_hash}; {PREAMBLE}):"
    ]
    lines += [f"- {_fact_line(f)}" for f in data.facts]
    return "\n".join(lines)


def render_integrity(data: IntegrityResult) -> str:
    head = "verified" if data.verified else "TAMPERED: stored hashes no longer match"
    lines = [
        f"Integrity of project {data.project}: {head}",
        f"{data.facts} facts, {data.episodes} episodes; merkle root {data.merkle_root}",
    ]
    lines += [
        f"- {m.kind} {m.id}: stored {m.stored}, computed {m.computed}" for m in data.mismatches
    ]
    lines += [f"- {p.kind} {p.record_type} {p.id}: {p.reason}" for p in data.problems]
    lines += [
        f"- erased {e.record_type} {e.id} ({e['erased_at']}, was sha256 {e.sha256}): {e.reason}"
        for e in data.erased
    ]
    return "\n".join(lines)


def render_episode_text(data: EpisodeOut) -> str:
    if data.quarantined:
        return _held("episode", data.id, data.quarantined)
    files = f"\nfiles: {spotlight(', '.join(data.files_touched))}" if data.files_touched else ""
    own = f" ({spotlight(data.external_id)})" if data.external_id else ""
    return (
        f"{PREAMBLE_LINE}\n[{data.id}]{own} {data.category}: {spotlight(data.title)} "
        f"(occurred {data['occurred_at']}){files}\n\n{spotlight(data.content)}"
    )


RECORD_DESCRIPTION = """\
Store an immutable episode of engineering knowledge: an ADR, a bug root cause, a module
invariant, a session note, a migration or an incident. Use it when you learned or decided
something a later session (or another tool) must not rediscover. Entities you name in
entities_mentioned are created on first mention and linked, so memory_query_entity and
memory_compile_context find the episode later. Effects: writes one episode (never edited
afterwards). With an external_id already recorded in the project, the same content answers the
stored episode (created=false) and different content is refused. Not for session progress
(use save_session) nor for a single current truth (use memory_upsert_fact)."""

UPSERT_DESCRIPTION = """\
Assert a fact `subject --predicate--> object` in the bi-temporal knowledge graph. The object is
object_value, or object_entity when it is itself an entity (object_value may then be omitted).
The fact is a graph edge (followed by memory_query_entity and 2-hop activation) when its object
is an entity: object_entity, an object_value that is the id of a known entity, or the object of
a relational predicate (depends_on, calls, owns, uses, ...). For a singular predicate (the
default) the current fact of (subject, predicate) is closed and superseded by the new one,
atomically; the answer lists what was superseded. The old value is kept as history, never
deleted. A valid_from in the future schedules the change: the current fact stays the truth
until then. A valid_from earlier than the current fact's records history; the same valid_from
as the current fact with another value is refused. Re-asserting the identical active fact
changes nothing. Use singular=false for predicates that hold several values at once."""

RETRACT_DESCRIPTION = """\
Close a fact's validity without a replacement: it stops being current at `at` (default now)
and stays in history. Use when something stopped being true and nothing replaces it; to change
a value use memory_upsert_fact instead. Effects: updates one fact's valid_until. A fact that
is already superseded or retracted is refused; `at` may not precede the fact's valid_from. A
scheduled fact (valid from a future time) retracted without `at` is cancelled: the fact it
would have replaced goes on."""

ENTITY_DESCRIPTION = """\
Everything the graph knows about one entity: the facts valid now, their history (superseded
and retracted facts with both dates), facts scheduled for a future time, related episodes, and
the ego graph over the edges valid now up to max_hops away, in both directions.
include_superseded also lists history and scheduled facts among the facts. Use to answer "what
is X, what does it depend on, why did it change". Read-only. Limits: max_hops 0..5."""

GET_EPISODE_DESCRIPTION = """\
Read one whole episode (an ADR, a bug root cause, an invariant, ...) by its id, its own
external_id, or its citation exactly as a compiled bundle shows it ([ADR:ADR-12],
[INCIDENT:ep_...]). Use when a bundle cites an episode as a cut preview and you need all of
it. Read-only."""

GET_FACT_DESCRIPTION = """\
Read one fact with its validity (valid_from, valid_until), status now (scheduled, active,
superseded, retracted), successor and source episode, by its id or by its citation exactly as
a compiled bundle shows it ([FACT:fact_...]). Use to check a cited fact before acting on it.
Read-only."""

TIME_TRAVEL_DESCRIPTION = """\
The facts that were valid at `as_of`, as they were known at transaction time `known_at`
(default now), with a snapshot hash. A fact recorded after known_at is invisible even if its
validity starts earlier. Use to answer "what did we believe on date D" or to audit a past
decision. Read-only."""

VERIFY_DESCRIPTION = """\
Recompute the SHA-256 of every fact and episode of the project from its canonical JSON and the
Merkle root over them, replay the project's hash-chained change log and compare the graph with
it as a set: names every record deleted, inserted or duplicated behind the application's back,
rewritten (even with its own hash recomputed), or whose files and entity links changed, and
any break in the log itself. Give checkpoint_size and checkpoint_head (from a signed
checkpoint) to prove the log still extends it. Lists erased records with their last hashes.
Use before trusting memory for an audit. Read-only; cost grows with the size of the project."""


#: The graph's tools: (operation, title, description, annotations, render).
TOOLS: tuple[tuple[Operation[Any, Any], str, str, ToolHints, Callable[[Any], str]], ...] = (
    (EPISODE_RECORD, "Record an episode", RECORD_DESCRIPTION, WRITE, render_episode),
    (FACT_UPSERT, "Assert a fact", UPSERT_DESCRIPTION, IDEMPOTENT_WRITE, render_fact),
    (FACT_RETRACT, "Retract a fact", RETRACT_DESCRIPTION, DESTRUCTIVE, render_retract),
    (ENTITY_QUERY, "Query an entity", ENTITY_DESCRIPTION, READ, render_entity),
    (TIME_TRAVEL, "Graph as of a date", TIME_TRAVEL_DESCRIPTION, READ, render_time_travel),
    (INTEGRITY_VERIFY, "Verify memory integrity", VERIFY_DESCRIPTION, READ, render_integrity),
    (EPISODE_GET, "Read an episode", GET_EPISODE_DESCRIPTION, READ, render_episode_text),
    (FACT_GET, "Read a fact", GET_FACT_DESCRIPTION, READ, _fact_line),
)


#: The graph's resources, JSON read from the default project of the call's identity:
#: (uri, name, title, description, selector called with project=).
RESOURCES: tuple[tuple[str, str, str, str, Callable[..., Output]], ...] = (
    (
        "memory://graph/summary",
        "graph-summary",
        "Knowledge graph summary",
        "Counts of your default project's knowledge graph (entities, facts by status, episodes "
        "by category), its revision and the Merkle root over all records, as JSON.",
        graph_summary.graph_summary,
    ),
    (
        "memory://episodes/recent",
        "episodes-recent",
        "Recent episodes",
        f"The {RECENT_EPISODES} most recent episodes of your default project (by occurred_at), "
        f"newest first, as JSON; content longer than {EPISODE_PREVIEW_CHARS} characters is cut "
        "(content_truncated) - fetch the full episode over REST.",
        partial(
            record_views.episodes_recent, limit=RECENT_EPISODES, preview_chars=EPISODE_PREVIEW_CHARS
        ),
    ),
    (
        "memory://graph/integrity",
        "graph-integrity",
        "Integrity of the knowledge graph",
        "memory_verify_integrity for your default project, as JSON.",
        integrity.integrity_verify,
    ),
)


def register(server: McpRegistry) -> None:
    for op, title, text, hints, render in TOOLS:
        add_tool(server, op, title=title, description=text, annotations=hints, render=render)
    for uri, name, title, text, select in RESOURCES:
        _add_resource(server, uri, name=name, title=title, description=text, select=select)


def _add_resource(
    server: McpRegistry,
    uri: str,
    *,
    name: str,
    title: str,
    description: str,
    select: Callable[..., Output],
) -> None:
    def read() -> str:
        answer = select(project=server.project_for(None, "read"))
        return json.dumps(answer.as_json(), indent=2, ensure_ascii=False)

    server.resource(
        uri, name=name, title=title, description=description, mime_type="application/json"
    )(read)
