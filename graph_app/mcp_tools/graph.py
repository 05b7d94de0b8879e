"""The knowledge graph and the context compiler over MCP: memory_* tools, graph resources, prompts.

Thin adapters over graph_app.services, graph_app.selectors and graph_app.compiler: the
structured content of each tool is exactly the REST response body for the same input.
"""

import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.prompts.base import UserMessage
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from graph_app import selectors, services
from graph_app.compiler import context_compile
from graph_app.services import (
    CONTENT_MAX,
    ENTITIES_MENTIONED_MAX,
    ENTITY_ID_MAX,
    EXTERNAL_ID_MAX,
    FILES_MAX,
    OBJECT_VALUE_MAX,
    PREDICATE_MAX,
    TITLE_MAX,
)
from memoryproject.mcp import (
    MemoryServer,
    ProjectArg,
    prompt_render,
    resource_read,
    timestamp_field,
    tool_call,
)

RECENT_EPISODES = 20
EPISODE_PREVIEW_CHARS = 2000
BRIEFING_TOKENS = 1500

Category = Literal["adr", "bug_root_cause", "invariant", "session_note", "migration", "incident"]

WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class _Open(BaseModel):
    # Services may add fields over time; they pass through rather than break the call.
    model_config = ConfigDict(extra="allow")


class FactView(_Open):
    id: str
    project: str
    subject: str
    predicate: str
    object_value: str
    object_entity: str | None = None
    singular: bool
    confidence: float
    valid_from: str
    valid_until: str | None = None
    recorded_at: str
    closed_at: str | None = None
    superseded_by: str | None = None
    source_episode: str | None = None
    status: Literal["active", "superseded", "retracted"]
    sha256: str
    revision: int | None = None


class EpisodeView(_Open):
    id: str
    project: str
    category: Category
    title: str
    content: str
    files_touched: list[str]
    entities_mentioned: list[str]
    metadata: dict[str, Any] = Field(default_factory=dict)
    occurred_at: str
    recorded_at: str
    external_id: str | None = None
    sha256: str
    revision: int | None = None


class EpisodeResult(EpisodeView):
    created: bool = Field(description="False when the same external_id was already recorded.")


class UpsertResult(_Open):
    fact: FactView
    created: bool
    outcome: Literal["active", "history", "unchanged"] = Field(
        description="active: the new current truth; history: recorded as past; unchanged: "
        "identical to the active fact."
    )
    superseded: list[FactView] = Field(description="Facts this one closed and superseded.")


class RetractResult(_Open):
    fact: FactView
    retracted: bool


class CompiledItem(_Open):
    kind: str = Field(description="fact, or the episode's category (adr, bug_root_cause, ...).")
    id: str
    external_id: str | None = Field(None, description="The episode's own id, when it has one.")
    score: float
    tokens: int
    citation: str
    truncated: bool = Field(False, description="Shown as a preview, cut to fit the budget.")


class CompileResult(_Open):
    project: str
    query: str
    markdown: str = Field(description="The context bundle; every line cites its source.")
    token_count: int = Field(description="Tokens of `markdown` (cl100k), never above max_tokens.")
    max_tokens: int
    as_of: str | None = None
    known_at: str | None = None
    include_superseded: bool
    revision: int = Field(description="Graph revision the bundle was compiled from.")
    items: list[CompiledItem]
    citations: list[str]
    suppressed_stale: int = Field(description="Superseded or retracted facts left out.")


class EntityView(_Open):
    id: str
    kind: str
    name: str
    aliases: list[str]
    created_at: str


class EgoNode(_Open):
    id: str
    kind: str
    hops: int


class EgoEdge(_Open):
    fact_id: str
    source: str
    predicate: str
    target: str


class EgoGraph(_Open):
    max_hops: int
    nodes: list[EgoNode]
    edges: list[EgoEdge]


class EntityResult(_Open):
    entity: EntityView
    facts: list[FactView]
    history: list[FactView] = Field(description="Superseded and retracted facts.")
    episodes: list[EpisodeView]
    ego_graph: EgoGraph


class TimeTravelResult(_Open):
    project: str
    as_of: str
    known_at: str
    count: int
    snapshot_hash: str
    facts: list[FactView]


class Mismatch(_Open):
    kind: Literal["fact", "episode"]
    id: str
    stored: str
    computed: str


class IntegrityResult(_Open):
    project: str
    verified: bool
    facts: int
    episodes: int
    records: int
    merkle_root: str
    mismatched_ids: list[str]
    mismatches: list[Mismatch]
    checked_at: str


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def _fact_line(fact: dict[str, Any]) -> str:
    until = fact.get("valid_until")
    span = f"valid {fact.get('valid_from')} .. {until or 'now'}"
    return (
        f"[{fact.get('id')}] {fact.get('subject')} --({fact.get('predicate')})--> "
        f"{fact.get('object_value')} ({fact.get('status')}, {span})"
    )


def render_episode(data: dict[str, Any]) -> str:
    verb = "recorded" if data.get("created", True) else "already recorded (same external_id)"
    return (
        f"Episode {verb}: [{data.get('id')}] {data.get('category')}: {data.get('title')}\n"
        f"sha256={data.get('sha256')}"
    )


def render_fact(data: dict[str, Any]) -> str:
    outcome = data.get("outcome")
    head = {
        "active": "Fact recorded as the current truth",
        "history": "Fact recorded as history (it starts before the current one)",
        "unchanged": "Identical to the active fact; nothing changed",
    }.get(str(outcome), f"Fact {outcome}")
    lines = [f"{head}:", _fact_line(data.get("fact") or {})]
    for old in data.get("superseded") or []:
        lines.append("Superseded: " + _fact_line(old))
    return "\n".join(lines)


def render_retract(data: dict[str, Any]) -> str:
    return "Fact retracted: " + _fact_line(data.get("fact") or {})


def render_compile(data: dict[str, Any]) -> str:
    if not data.get("items"):
        return "(no memory matched the query)"
    return str(data.get("markdown") or "")


def render_entity(data: dict[str, Any]) -> str:
    entity = data.get("entity") or {}
    lines = [f"Entity {entity.get('id')} ({entity.get('kind') or 'unknown kind'})"]
    lines.append("Facts:")
    lines += [f"- {_fact_line(f)}" for f in data.get("facts") or []] or ["- (none)"]
    if data.get("history"):
        lines.append("History:")
        lines += [f"- {_fact_line(f)}" for f in data["history"]]
    if data.get("episodes"):
        lines.append("Episodes:")
        lines += [
            f"- [{e.get('id')}] {e.get('category')}: {e.get('title')}" for e in data["episodes"]
        ]
    ego = data.get("ego_graph") or {}
    nodes = ", ".join(f"{n.get('id')}({n.get('hops')})" for n in ego.get("nodes") or [])
    lines.append(f"Ego graph within {ego.get('max_hops')} hops: {nodes}")
    lines += [
        f"- {e.get('source')} --({e.get('predicate')})--> {e.get('target')} [{e.get('fact_id')}]"
        for e in ego.get("edges") or []
    ]
    return "\n".join(lines)


def render_time_travel(data: dict[str, Any]) -> str:
    lines = [
        f"{data.get('count')} fact(s) valid at {data.get('as_of')} as known at "
        f"{data.get('known_at')} (snapshot {data.get('snapshot_hash')}):"
    ]
    lines += [f"- {_fact_line(f)}" for f in data.get("facts") or []]
    return "\n".join(lines)


def render_integrity(data: dict[str, Any]) -> str:
    head = "verified" if data.get("verified") else "TAMPERED: stored hashes no longer match"
    lines = [
        f"Integrity of project {data.get('project')}: {head}",
        f"{data.get('facts')} facts, {data.get('episodes')} episodes; "
        f"merkle root {data.get('merkle_root')}",
    ]
    for m in data.get("mismatches") or []:
        lines.append(
            f"- {m.get('kind')} {m.get('id')}: stored {m.get('stored')}, computed {m.get('computed')}"
        )
    return "\n".join(lines)


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
Assert a fact `subject --predicate--> object_value` in the bi-temporal knowledge graph.
For a singular predicate (the default) the current fact of (subject, predicate) is closed and
superseded by the new one, atomically; the answer lists what was superseded. The old value is
kept as history (memory_time_travel / include_superseded), never deleted. Re-asserting the
identical active fact changes nothing. A valid_from earlier than the active fact's records
history without replacing the current truth. Use singular=false for predicates that hold
several values at once (e.g. depends_on). Entities are created on first mention."""

RETRACT_DESCRIPTION = """\
Close a fact's validity without a replacement: it stops being current at `at` (default now)
and stays in history. Use when something stopped being true and nothing replaces it; to change
a value use memory_upsert_fact instead. Effects: updates one fact's valid_until. A fact that
is already superseded or retracted is refused; `at` may not precede the fact's valid_from."""

COMPILE_DESCRIPTION = """\
Compile the memory most relevant to `query` into a markdown bundle that fits max_tokens:
active facts and episodes ranked by BM25 with code-aware tokens, plus what they depend on
(2-hop graph activation). Every line cites its source ([FACT:id], [ADR:id], ...). Use before
starting a task, with the task description as query. Read-only. Superseded facts never
appear unless include_superseded; as_of / known_at replay the context an agent would have
received at that time. Limits: max_tokens 64..32000; the bundle never exceeds it."""

ENTITY_DESCRIPTION = """\
Everything the graph knows about one entity: its active facts, their history (superseded and
retracted facts with both dates), related episodes, and the ego graph over active edges up to
max_hops away. Use to answer "what is X, what does it depend on, why did it change".
Read-only. Limits: max_hops 0..5."""

TIME_TRAVEL_DESCRIPTION = """\
The facts that were valid at `as_of`, as they were known at transaction time `known_at`
(default now), with a snapshot hash. A fact recorded after known_at is invisible even if its
validity starts earlier. Use to answer "what did we believe on date D" or to audit a past
decision. Read-only."""

VERIFY_DESCRIPTION = """\
Recompute the SHA-256 of every fact and episode of the project from its canonical JSON and
the Merkle root over them, and name every record whose stored hash no longer matches (a row
changed behind the application's back). Use before trusting memory for an audit. Read-only;
cost grows with the size of the project."""


def register(server: MemoryServer) -> None:
    @server.tool(
        name="memory_record_episode",
        title="Record an episode",
        description=RECORD_DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def memory_record_episode(
        title: Annotated[
            str, Field(description="One-line title.", min_length=1, max_length=TITLE_MAX)
        ],
        category: Annotated[
            Category,
            Field(
                description="adr, bug_root_cause, invariant, session_note, migration or incident."
            ),
        ],
        content: Annotated[
            str,
            Field(
                description="The knowledge itself, in prose or markdown.",
                min_length=1,
                max_length=CONTENT_MAX,
            ),
        ],
        files_touched: Annotated[
            list[str],
            Field(description="Repository paths the episode concerns.", max_length=FILES_MAX),
        ] = [],  # noqa: B006 - the schema default; never mutated
        entities_mentioned: Annotated[
            list[str],
            Field(
                description="Entity ids (slugs such as auth_service) it is about.",
                max_length=ENTITIES_MENTIONED_MAX,
            ),
        ] = [],  # noqa: B006
        occurred_at: Annotated[
            str | None, timestamp_field("When it happened (default now).")
        ] = None,
        external_id: Annotated[
            str | None,
            Field(
                description="Your own id for it, unique per project (for de-duplication).",
                max_length=EXTERNAL_ID_MAX,
            ),
        ] = None,
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, EpisodeResult]:
        return tool_call(
            "memory_record_episode",
            lambda: services.episode_record(
                project=server.project_for(project, "write"),
                title=title,
                category=category,
                content=content,
                files_touched=tuple(files_touched),
                entities_mentioned=tuple(entities_mentioned),
                occurred_at=occurred_at,
                external_id=external_id,
            ),
            render=render_episode,
        )

    @server.tool(
        name="memory_upsert_fact",
        title="Assert a fact",
        description=UPSERT_DESCRIPTION,
        annotations=WRITE,
    )
    def memory_upsert_fact(
        subject_id: Annotated[
            str,
            Field(
                description="Entity id of the subject, e.g. auth_service.",
                min_length=1,
                max_length=ENTITY_ID_MAX,
            ),
        ],
        predicate: Annotated[
            str,
            Field(
                description="Relation name, e.g. uses_token_format.",
                min_length=1,
                max_length=PREDICATE_MAX,
            ),
        ],
        object_value: Annotated[
            str,
            Field(
                description="The value, e.g. PASETO_v4_public.",
                min_length=1,
                max_length=OBJECT_VALUE_MAX,
            ),
        ],
        singular: Annotated[
            bool, Field(description="True: one current value per (subject, predicate).")
        ] = True,
        valid_from: Annotated[
            str | None, timestamp_field("When the fact became true in the world (default now).")
        ] = None,
        source_episode: Annotated[
            str | None,
            Field(description="Id of the episode this fact comes from (ep_...).", max_length=40),
        ] = None,
        object_entity: Annotated[
            str | None,
            Field(
                description=(
                    "Entity id when the object is itself an entity (e.g. depends_on "
                    "payment_ledger): makes the fact a graph edge that memory_query_entity and "
                    "the compiler's 2-hop activation follow."
                ),
                max_length=ENTITY_ID_MAX,
            ),
        ] = None,
        confidence: Annotated[
            float, Field(description="How sure you are, 0..1.", ge=0.0, le=1.0)
        ] = 1.0,
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, UpsertResult]:
        return tool_call(
            "memory_upsert_fact",
            lambda: services.fact_upsert(
                project=server.project_for(project, "write"),
                subject_id=subject_id,
                predicate=predicate,
                object_value=object_value,
                singular=singular,
                valid_from=valid_from,
                source_episode=source_episode,
                object_entity=object_entity,
                confidence=confidence,
            ),
            render=render_fact,
        )

    @server.tool(
        name="memory_retract_fact",
        title="Retract a fact",
        description=RETRACT_DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def memory_retract_fact(
        fact_id: Annotated[
            str, Field(description="Id of the fact to retract.", min_length=1, max_length=40)
        ],
        at: Annotated[
            str | None, timestamp_field("When the fact stopped being true (default now).")
        ] = None,
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, RetractResult]:
        return tool_call(
            "memory_retract_fact",
            lambda: services.fact_retract(
                project=server.project_for(project, "write"), fact_id=fact_id, at=at
            ),
            render=render_retract,
        )

    @server.tool(
        name="memory_compile_context",
        title="Compile relevant memory",
        description=COMPILE_DESCRIPTION,
        annotations=READ,
    )
    def memory_compile_context(
        query: Annotated[
            str, Field(description="The task or question, in words and identifiers.", min_length=1)
        ],
        max_tokens: Annotated[
            int, Field(description="Token budget of the bundle (cl100k).", ge=64, le=32000)
        ] = 1200,
        as_of: Annotated[
            str | None, timestamp_field("Compile what was valid at this time (default now).")
        ] = None,
        known_at: Annotated[
            str | None,
            timestamp_field("Compile only what had been recorded by this time (default now)."),
        ] = None,
        include_superseded: Annotated[
            bool, Field(description="Also include superseded facts (marked as such).")
        ] = False,
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, CompileResult]:
        return tool_call(
            "memory_compile_context",
            lambda: context_compile(
                project=server.project_for(project, "read"),
                query=query,
                max_tokens=max_tokens,
                as_of=as_of,
                known_at=known_at,
                include_superseded=include_superseded,
            ),
            render=render_compile,
        )

    @server.tool(
        name="memory_query_entity",
        title="Query an entity",
        description=ENTITY_DESCRIPTION,
        annotations=READ,
    )
    def memory_query_entity(
        entity_id: Annotated[
            str,
            Field(
                description="Entity id, e.g. payment_ledger.",
                min_length=1,
                max_length=ENTITY_ID_MAX,
            ),
        ],
        max_hops: Annotated[int, Field(description="Ego-graph radius.", ge=0, le=5)] = 2,
        include_superseded: Annotated[
            bool, Field(description="Also walk superseded edges.")
        ] = False,
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, EntityResult]:
        return tool_call(
            "memory_query_entity",
            lambda: selectors.entity_query(
                project=server.project_for(project, "read"),
                entity_id=entity_id,
                max_hops=max_hops,
                include_superseded=include_superseded,
            ),
            render=render_entity,
        )

    @server.tool(
        name="memory_time_travel",
        title="Graph as of a date",
        description=TIME_TRAVEL_DESCRIPTION,
        annotations=READ,
    )
    def memory_time_travel(
        as_of: Annotated[
            str,
            Field(
                description="Valid time, ISO-8601 with a timezone, e.g. 2026-02-01T00:00:00Z.",
                min_length=1,
                max_length=64,
            ),
        ],
        known_at: Annotated[
            str | None,
            timestamp_field("Transaction time: only what had been recorded by then (default now)."),
        ] = None,
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, TimeTravelResult]:
        return tool_call(
            "memory_time_travel",
            lambda: selectors.graph_as_of(
                project=server.project_for(project, "read"), as_of=as_of, known_at=known_at
            ),
            render=render_time_travel,
        )

    @server.tool(
        name="memory_verify_integrity",
        title="Verify memory integrity",
        description=VERIFY_DESCRIPTION,
        annotations=READ,
    )
    def memory_verify_integrity(
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, IntegrityResult]:
        return tool_call(
            "memory_verify_integrity",
            lambda: selectors.integrity_verify(project=server.project_for(project, "read")),
            render=render_integrity,
        )

    @server.resource(
        "memory://graph/summary",
        name="graph-summary",
        title="Knowledge graph summary",
        description=(
            "Counts of the default project's knowledge graph (entities, facts by status, "
            "episodes by category), its revision and the Merkle root over all records, as JSON."
        ),
        mime_type="application/json",
    )
    def graph_summary() -> str:
        def summarize() -> dict[str, Any]:
            return selectors.graph_summary(project=server.project_for(None, "read"))

        return _json(resource_read("memory://graph/summary", summarize))

    @server.resource(
        "memory://episodes/recent",
        name="episodes-recent",
        title="Recent episodes",
        description=(
            f"The {RECENT_EPISODES} most recent episodes of the default project (by "
            f"occurred_at), newest first, as JSON; content longer than {EPISODE_PREVIEW_CHARS} "
            "characters is cut (content_truncated) - fetch the full episode over REST."
        ),
        mime_type="application/json",
    )
    def episodes_recent() -> str:
        def recent() -> dict[str, Any]:
            target = server.project_for(None, "read")
            rows = selectors.episodes_query(project=target)[:RECENT_EPISODES]
            items = []
            for episode in rows:
                item = selectors.episode_as_dict(episode)
                content = item["content"]
                item["content_truncated"] = len(content) > EPISODE_PREVIEW_CHARS
                item["content"] = content[:EPISODE_PREVIEW_CHARS]
                items.append(item)
            return {"project": target.slug, "count": len(items), "episodes": items}

        return _json(resource_read("memory://episodes/recent", recent))

    @server.resource(
        "memory://graph/integrity",
        name="graph-integrity",
        title="Integrity of the knowledge graph",
        description="memory_verify_integrity for the server's default project, as JSON.",
        mime_type="application/json",
    )
    def graph_integrity() -> str:
        return _json(
            resource_read(
                "memory://graph/integrity",
                lambda: selectors.integrity_verify(project=server.project_for(None, "read")),
            )
        )

    @server.prompt(
        name="architecture-briefing",
        title="Architecture briefing",
        description=(
            "A briefing on one component assembled from compiled memory: its current facts, "
            "dependencies and decisions, each line citing its source."
        ),
    )
    def architecture_briefing(
        component: Annotated[
            str, Field(description="Component, module or entity id, e.g. auth_service.")
        ],
    ) -> list[UserMessage]:
        def assemble() -> str:
            compiled = context_compile(
                project=server.project_for(None, "read"),
                query=f"{component} architecture decision design invariant depends_on uses",
                max_tokens=BRIEFING_TOKENS,
            )
            return (
                f"Brief me on the architecture of `{component}`: what it is, what it depends on, "
                "the decisions that shaped it and the invariants it must keep. Use only the "
                "memory below, cite the [ids], and say what is missing.\n\n"
                + (compiled.get("markdown") or f"(memory holds nothing about {component} yet)")
            )

        return [UserMessage(prompt_render("architecture-briefing", assemble))]

    @server.prompt(
        name="bug-investigation-context",
        title="Bug investigation context",
        description=(
            "Context for investigating a symptom, assembled from compiled memory: related bug "
            "root causes, incidents, invariants and the facts of the components involved."
        ),
    )
    def bug_investigation_context(
        symptom: Annotated[str, Field(description="The observed symptom or error message.")],
    ) -> list[UserMessage]:
        def assemble() -> str:
            compiled = context_compile(
                project=server.project_for(None, "read"),
                query=f"{symptom} bug root cause incident invariant",
                max_tokens=BRIEFING_TOKENS,
            )
            return (
                f"Investigate this symptom: {symptom}\n\nBefore changing code, check the "
                "memory below for earlier root causes, incidents and invariants of the "
                "components involved; cite the [ids] you rely on.\n\n"
                + (compiled.get("markdown") or "(memory holds nothing related yet)")
            )

        return [UserMessage(prompt_render("bug-investigation-context", assemble))]
