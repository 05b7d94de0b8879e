"""Session memory over MCP: save_session, load_session, plan_context and memory://sessions/latest.

Thin adapters over sessions_app.services: the structured content of each tool is exactly the
REST response body, and injections are receipted like REST ones, with channel "mcp" and the
client's name from `initialize`.
"""

from typing import Annotated, Any, Literal

from django.conf import settings
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from graph_app.compiler import context_compile
from memoryproject.mcp import (
    MemoryServer,
    ProjectArg,
    current_client,
    prompt_render,
    resource_read,
    tool_call,
)
from sessions_app import services

# The resume prompt compiles durable memory against the start of the saved summary.
RESUME_QUERY_CHARS = 600
RESUME_TOKENS = 800


class _Open(BaseModel):
    # Services may add fields over time; they pass through rather than break the call.
    model_config = ConfigDict(extra="allow")


Decision = Literal["PASS", "REFINE", "ESCALATE"]


class TrustSignals(_Open):
    p: float = Field(description="Coverage of what the next session needs, 0..1.")
    ue: float = Field(description="Epistemic uncertainty (divergence, vagueness), 0..1.")
    ua: float = Field(description="Aleatoric uncertainty (risk of the sources), 0..1.")
    total_uncertainty: float = Field(description="ue + ua, capped at 1.")


class PlanSignals(TrustSignals):
    traces_used: int
    fields_present: list[str]


class PlanContextFields(_Open):
    active_project: str | None = None
    last_decision: str | None = None
    open_questions: list[str] = Field(default_factory=list)
    current_output: str | None = None
    recent_models: list[str] = Field(default_factory=list)


class PlanResult(_Open):
    status: Literal["injected", "flagged", "empty"]
    mode: Literal["auto", "force", "dry_run"]
    dry_run: bool
    project: str
    trust_score: float
    confidence: float
    risk: float
    decision: Decision
    threshold: float
    signals: PlanSignals
    context: PlanContextFields
    system_prompt: str | None = Field(None, description="Present when status is 'injected'.")
    flagged_reason: str | None = Field(None, description="Present when flagged or empty.")
    would_inject: bool | None = Field(None, description="dry_run only: what auto would do.")
    trace_ids: list[str]
    generated_at: str
    injection_id: int = Field(description="Receipt of this decision in the injection log.")


class SaveResult(_Open):
    trace_id: str
    project: str
    trust_score: float
    confidence: float
    risk: float
    decision: Decision
    tokens: int
    signals: TrustSignals = Field(description="Why the summary scored as it did.")
    saved_at: str


class LoadResult(_Open):
    found: bool
    project: str
    threshold: float
    max_age_days: int
    reason: str | None = Field(None, description="found=false: why nothing was returned.")
    rule: str | None = Field(None, description="found=false: the rule that refused.")
    trace_id: str | None = None
    summary: str | None = None
    trust_score: float | None = None
    confidence: float | None = None
    risk: float | None = None
    decision: Decision | None = None
    tokens: int | None = None
    signals: dict[str, Any] | None = None
    saved_at: str | None = None
    system_prompt: str | None = Field(
        None, description="found=true: the inject-ready SESSION_CONTEXT block."
    )
    generated_at: str | None = None
    injection_id: int | None = None


def _score_line(data: dict[str, Any]) -> str:
    return (
        f"trust={data.get('trust_score')} risk={data.get('risk')} decision={data.get('decision')}"
    )


def render_plan(data: dict[str, Any]) -> str:
    status = data.get("status")
    head = f"plan_context: {status} ({_score_line(data)})"
    if status == "injected":
        return (
            f"{head}\ninjection_id={data.get('injection_id')}\n\n{data.get('system_prompt') or ''}"
        )
    return f"{head}\n{data.get('flagged_reason') or ''}"


def render_save(data: dict[str, Any]) -> str:
    signals = data.get("signals") or {}
    why = ", ".join(f"{k}={v}" for k, v in signals.items() if not isinstance(v, dict | list))
    missing = [
        name
        for name, finding in (signals.get("elements") or {}).items()
        if isinstance(finding, dict) and finding.get("evidence") == "missing"
    ]
    lines = [
        f"Session summary saved as trace {data.get('trace_id')} "
        f"({_score_line(data)}, {data.get('tokens')} tokens).",
        f"Signals: {why}",
    ]
    if missing:
        lines.append("Missing for the next session: " + ", ".join(missing))
    return "\n".join(lines)


def render_load(data: dict[str, Any]) -> str:
    if not data.get("found"):
        return f"No session context returned: {data.get('reason')}"
    return str(data.get("system_prompt") or "")


PLAN_DESCRIPTION = """\
Build the context of earlier work from the project's most recent traces, trust-score it, and
inject it (return a system prompt) only when it is trustworthy; otherwise flag it for human
review. Use at the start of a session when earlier agents recorded traces (POST /v1/traces).
Prefer load_session when you only need your own last saved summary.
Effects: every call writes one receipt to the project's injection log (all modes), with
channel "mcp" and your client name. mode "auto" injects when trust_score >= trust_threshold;
"force" always injects; "dry_run" computes and never injects. With no traces the status is
"empty" and the reason says how to start. Reads at most 50 traces."""

SAVE_DESCRIPTION = """\
Persist a summary of this session so the next session can resume from it (load_session).
Use at the end of a session or at a milestone. The summary is trust-scored: it scores well
when it states the active project, the last decision, the current output, the open questions
and the key files; short or vague summaries score low and load_session will refuse them.
Effects: writes one saved summary (and its trace). Not for durable engineering knowledge:
record that with memory_record_episode / memory_upsert_fact instead. Limit: the summary must
be non-empty and at most {max_chars:,} characters."""

LOAD_DESCRIPTION = """\
Return the latest saved session summary of the project as an inject-ready SESSION_CONTEXT
block, but only if its trust score passes `threshold` and it is not older than `max_age_days`
(server default {max_age_days} days). Otherwise answers found=false with the rule that refused it: it never
returns low-trust or stale context. Use at the start of a session. Effects: when context is
returned, one receipt is written to the injection log (channel "mcp", your client name)."""


def register(server: MemoryServer) -> None:
    max_chars = int(settings.SESSION_SUMMARY_MAX_CHARS)

    @server.tool(
        name="plan_context",
        title="Plan context from recent traces",
        description=PLAN_DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def plan_context(
        n: Annotated[
            int, Field(description="How many of the most recent traces to use.", ge=1, le=50)
        ] = 5,
        trust_threshold: Annotated[
            float,
            Field(description="Minimum trust score for mode 'auto' to inject.", ge=0.0, le=1.0),
        ] = 0.75,
        mode: Annotated[
            Literal["auto", "force", "dry_run"],
            Field(description="auto: inject when trusted; force: always; dry_run: never."),
        ] = "auto",
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, PlanResult]:
        return tool_call(
            "plan_context",
            lambda: services.plan_context(
                project=server.project_for(project, "write"),
                n=n,
                trust_threshold=trust_threshold,
                mode=mode,
                channel="mcp",
                client=current_client(),
            ),
            render=render_plan,
        )

    @server.tool(
        name="save_session",
        title="Save session summary",
        description=SAVE_DESCRIPTION.format(max_chars=max_chars),
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def save_session(
        summary: Annotated[
            str,
            Field(
                description=(
                    "The session summary. Name the active project, the last decision, the "
                    "current output, open questions and key files."
                ),
                min_length=1,
                max_length=max_chars,
            ),
        ],
        project: ProjectArg = None,
    ) -> Annotated[CallToolResult, SaveResult]:
        return tool_call(
            "save_session",
            lambda: services.session_save(
                project=server.project_for(project, "write"), summary=summary
            ),
            render=render_save,
        )

    @server.tool(
        name="load_session",
        title="Load the last trusted session summary",
        description=LOAD_DESCRIPTION.format(max_age_days=settings.SESSION_MAX_AGE_DAYS),
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def load_session(
        threshold: Annotated[
            float,
            Field(description="Minimum trust score of the summary to return.", ge=0.0, le=1.0),
        ] = 0.45,
        project: ProjectArg = None,
        max_age_days: Annotated[
            int | None,
            Field(
                description="Refuse summaries older than this many days (default: server setting).",
                ge=1,
                le=3650,
            ),
        ] = None,
    ) -> Annotated[CallToolResult, LoadResult]:
        return tool_call(
            "load_session",
            lambda: services.session_load(
                project=server.project_for(project, "read"),
                threshold=threshold,
                max_age_days=max_age_days,
                channel="mcp",
                client=current_client(),
            ),
            render=render_load,
        )

    @server.resource(
        "memory://sessions/latest",
        name="sessions-latest",
        title="Latest verified session context",
        description=(
            "The latest saved session summary of the server's default project that passes the "
            "default trust threshold and age limit, as an inject-ready block; otherwise why "
            "there is none. Reading it receipts the injection like load_session."
        ),
        mime_type="text/plain",
    )
    def sessions_latest() -> str:
        data = resource_read(
            "memory://sessions/latest",
            lambda: services.session_load(
                project=server.project_for(None, "read"),
                channel="mcp",
                client=current_client(),
            ),
        )
        return render_load(data)

    @server.prompt(
        name="session-resume",
        title="Resume the last session",
        description=(
            "A message that resumes work from the project's latest trusted session summary "
            "(load_session) plus the durable memory most relevant to it (compiled context), "
            "or says why there is nothing trustworthy to resume from."
        ),
    )
    def session_resume(
        project: Annotated[
            str | None,
            Field(description="Project slug; omit for the server's default project."),
        ] = None,
    ) -> list[UserMessage]:
        def assemble() -> str:
            target = server.project_for(project, "read")
            loaded = services.session_load(project=target, channel="mcp", client=current_client())
            parts = [f"Resume work on project '{target.slug}'."]
            if not loaded.get("found"):
                parts.append(f"There is no trusted saved session to resume: {loaded.get('reason')}")
                parts.append(
                    "Ask what to work on, or call plan_context to build context from recent "
                    "traces. Call save_session when you stop."
                )
                return "\n\n".join(parts)
            parts.append("Your last saved session (verified):\n" + render_load(loaded))
            query = str(loaded.get("summary") or render_load(loaded))[:RESUME_QUERY_CHARS]
            compiled = context_compile(project=target, query=query, max_tokens=RESUME_TOKENS)
            if compiled.get("items"):
                parts.append("Durable memory relevant to it:\n" + str(compiled.get("markdown")))
            parts.append("Confirm the active task, then continue. Call save_session when you stop.")
            return "\n\n".join(parts)

        return [UserMessage(prompt_render("session-resume", assemble))]
