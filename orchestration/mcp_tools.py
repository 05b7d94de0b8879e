"""The MCP prompt that spans apps: session-resume joins the latest trusted session summary
(``sessions_app``) with the durable memory compiled against it (``graph_app``), receipted like
any delivery."""

from typing import Annotated

from pydantic import Field

from graph_app.mcp_tools.compile import prompt_with_memory
from memoryproject.mcp_calls import McpRegistry, add_prompt
from sessions_app.mcp_tools import render_load
from sessions_app.session_memory import session_load

# The resume prompt compiles durable memory against the start of the saved summary.
RESUME_QUERY_CHARS = 600
RESUME_TOKENS = 800


def register(server: McpRegistry) -> None:
    _register_resume(server)


def _resume_message(server: McpRegistry, project: str | None) -> str:
    target = server.project_for(project, "read")
    loaded = session_load(project=target, caller=server.caller())
    parts = [f"Resume work on project '{target.slug}'."]
    if not loaded.found:
        parts.append(f"There is no trusted saved session to resume: {loaded.reason}")
        parts.append(
            "Ask what to work on, or call plan_context to build context from recent "
            "traces. Call save_session when you stop."
        )
        return "\n\n".join(parts)
    parts.append("Your last saved session (verified):\n" + render_load(loaded))
    query = (loaded.summary or render_load(loaded))[:RESUME_QUERY_CHARS]

    def frame(markdown: str) -> str:
        memory = ["Durable memory relevant to it:\n" + markdown] if markdown else []
        ending = "Confirm the active task, then continue. Call save_session when you stop."
        return "\n\n".join([*parts, *memory, ending])

    return prompt_with_memory(server, query, frame, project=target.slug, max_tokens=RESUME_TOKENS)


def _register_resume(server: McpRegistry) -> None:
    @add_prompt(
        server,
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
            Field(description="Project slug; omit for your default project."),
        ] = None,
    ) -> str:
        return _resume_message(server, project)
