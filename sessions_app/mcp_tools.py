"""Session memory over MCP: save_session, load_session, plan_context and memory://sessions/latest.

Thin adapters over the session services (trace_writes, plan, session_memory): the structured
content of each tool is exactly the REST response body, and injections are receipted like REST
ones, with channel "mcp", the call's identity and, beside it, the client's self-reported name
from `initialize`.
"""

from django.conf import settings

from memoryproject.mcp_calls import WRITE, McpRegistry, ToolSpec, add_tools
from sessions_app.contracts import LoadResult, PlanResult, SaveResult
from sessions_app.operations import PLAN_CONTEXT, SESSION_LOAD, SESSION_SAVE
from sessions_app.session_memory import session_load


def _score_line(data: PlanResult | SaveResult) -> str:
    return f"trust={data.trust_score} risk={data.risk} decision={data.decision}"


def render_plan(data: PlanResult) -> str:
    head = f"plan_context: {data.status} ({_score_line(data)})"
    if data.status == "injected":
        return f"{head}\ninjection_id={data.injection_id}\n\n{data.system_prompt or ''}"
    return f"{head}\n{data.flagged_reason or ''}"


def render_save(data: SaveResult) -> str:
    signals = data.signals
    why = ", ".join(f"{k}={v}" for k, v in signals.items() if not isinstance(v, dict | list))
    missing = [
        name
        for name, finding in (signals.get("elements") or {}).items()
        if isinstance(finding, dict) and finding.get("evidence") == "missing"
    ]
    lines = [
        f"Session summary saved as trace {data.trace_id} "
        f"({_score_line(data)}, {data.tokens} tokens).",
        f"Signals: {why}",
    ]
    if missing:
        lines.append("Missing for the next session: " + ", ".join(missing))
    return "\n".join(lines)


def render_load(data: LoadResult) -> str:
    if not data.found:
        return f"No session context returned: {data.reason}"
    return data.system_prompt or ""


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


def register(server: McpRegistry) -> None:
    save = SAVE_DESCRIPTION.format(max_chars=int(settings.SESSION_SUMMARY_MAX_CHARS))
    load = LOAD_DESCRIPTION.format(max_age_days=settings.SESSION_MAX_AGE_DAYS)
    tools: tuple[ToolSpec, ...] = (
        (PLAN_CONTEXT, "Plan context from recent traces", PLAN_DESCRIPTION, WRITE, render_plan),
        (SESSION_SAVE, "Save session summary", save, WRITE, render_save),
        (SESSION_LOAD, "Load the last trusted session summary", load, WRITE, render_load),
    )
    add_tools(server, tools)
    _register_latest(server)


def _register_latest(server: McpRegistry) -> None:
    @server.resource(
        "memory://sessions/latest",
        name="sessions-latest",
        title="Latest verified session context",
        description=(
            "The latest saved session summary of your default project that passes the "
            "default trust threshold and age limit, as an inject-ready block; otherwise why "
            "there is none. Reading it receipts the injection like load_session."
        ),
        mime_type="text/plain",
    )
    def sessions_latest() -> str:
        data = session_load(project=server.project_for(None, "read"), caller=server.caller())
        return render_load(data)
