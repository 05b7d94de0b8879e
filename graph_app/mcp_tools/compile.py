"""The context compiler over MCP: the memory_compile_context tool and the prompts assembled from
compiled memory (architecture-briefing, bug-investigation-context).

The tool is built from the same operation as ``POST /v1/graph/compile``
(``graph_app.operations.CONTEXT_COMPILE``): same arguments, errors and structured answer.
"""

from typing import Annotated

from mcp.server.mcpserver.prompts.base import UserMessage
from pydantic import Field

from graph_app.compiler import context_compile
from graph_app.contracts.compile import CompileResult
from graph_app.operations import CONTEXT_COMPILE
from memoryproject.mcp import READ, MemoryServer, add_tool, prompt_render

# The prompts' budget: a briefing is read by the agent before it starts, so it may be longer
# than the default bundle.
BRIEFING_TOKENS = 1500

COMPILE_DESCRIPTION = """\
Compile the memory most relevant to `query` into a markdown bundle that fits max_tokens:
active facts and episodes ranked by BM25 with code-aware tokens, plus what they depend on
(2-hop graph activation). Every line cites its source ([FACT:id], [ADR:id], ...). Use before
starting a task, with the task description as query. Read-only. Superseded or retracted facts
never appear unless include_superseded; as_of / known_at replay the context an agent would
have received at that time. Limits: max_tokens 64..32000; the bundle never exceeds it."""


def render_compile(data: CompileResult) -> str:
    if not data.items:
        return "(no memory matched the query)"
    return data.markdown


def register(server: MemoryServer) -> None:
    add_tool(
        server,
        CONTEXT_COMPILE,
        title="Compile relevant memory",
        description=COMPILE_DESCRIPTION,
        annotations=READ,
        render=render_compile,
    )
    _register_briefing(server)
    _register_bug_context(server)


def _compiled_markdown(server: MemoryServer, query: str) -> str:
    """The default project's compiled memory for ``query`` ("" when nothing matched)."""
    compiled: CompileResult = context_compile(
        project=server.project_for(None, "read"), query=query, max_tokens=BRIEFING_TOKENS
    )
    return compiled.markdown


def _register_briefing(server: MemoryServer) -> None:
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
            markdown = _compiled_markdown(
                server, f"{component} architecture decision design invariant depends_on uses"
            )
            return (
                f"Brief me on the architecture of `{component}`: what it is, what it depends on, "
                "the decisions that shaped it and the invariants it must keep. Use only the "
                "memory below, cite the [ids], and say what is missing.\n\n"
                + (markdown or f"(memory holds nothing about {component} yet)")
            )

        return [UserMessage(prompt_render("architecture-briefing", assemble))]


def _register_bug_context(server: MemoryServer) -> None:
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
            markdown = _compiled_markdown(server, f"{symptom} bug root cause incident invariant")
            return (
                f"Investigate this symptom: {symptom}\n\nBefore changing code, check the "
                "memory below for earlier root causes, incidents and invariants of the "
                "components involved; cite the [ids] you rely on.\n\n"
                + (markdown or "(memory holds nothing related yet)")
            )

        return [UserMessage(prompt_render("bug-investigation-context", assemble))]
