"""The context compiler over MCP: the memory_compile_context tool and the prompts assembled from
compiled memory (architecture-briefing, bug-investigation-context).

The tool is built from the same operation as ``POST /v1/graph/compile``
(``graph_app.operations.CONTEXT_COMPILE``): same arguments, errors and structured answer.
"""

from collections.abc import Callable
from typing import Annotated

from pydantic import Field

from graph_app.compiler import context_compile
from graph_app.contracts.compile import QUERY_MAX_CHARS, CompileInput, CompileResult
from graph_app.delivery import delivery_receipt
from graph_app.operations import CONTEXT_COMPILE
from graph_app.quarantine_holds import deliveries_held
from memoryproject.domain.screening import text_mask
from memoryproject.mcp_calls import WRITE, McpRegistry, add_prompt, add_tool
from memoryproject.writes import write_transaction

# The prompts' budget: a briefing is read by the agent before it starts, so it may be longer
# than the default bundle.
BRIEFING_TOKENS = 1500

COMPILE_DESCRIPTION = """\
Compile the memory most relevant to `query` into a markdown bundle that fits max_tokens:
active facts and episodes ranked by BM25 with code-aware tokens, plus what they depend on
(2-hop graph activation). Every line cites its source ([FACT:id], [ADR:id], ...). Use before
starting a task, with the task description as query. Superseded or retracted facts never
appear unless include_superseded; as_of / known_at replay the context an agent would have
received at that time. Effects: reads memory and writes one receipt of the delivery to the
injection log (what was asked, each source's hash, the bundle's hash): injection_id names it.
Limits: max_tokens 64..32000; the bundle never exceeds it."""


def render_compile(data: CompileResult) -> str:
    if not data.items:
        return "(no memory matched the query)"
    return data.markdown


def register(server: McpRegistry) -> None:
    add_tool(
        server,
        CONTEXT_COMPILE,
        title="Compile relevant memory",
        description=COMPILE_DESCRIPTION,
        annotations=WRITE,
        render=render_compile,
    )
    _register_briefing(server)
    _register_bug_context(server)


def prompt_with_memory(
    server: McpRegistry,
    query: str,
    frame: Callable[[str], str],
    *,
    project: str | None = None,
    max_tokens: int = BRIEFING_TOKENS,
) -> str:
    """The text of a prompt built by ``frame`` around the memory compiled for ``query`` ("" when
    nothing matched), receipted like any delivery (source "prompt", the exact text's hash)."""
    target = server.project_for(project, "read")
    params = CompileInput.parse({"query": query[:QUERY_MAX_CHARS], "max_tokens": max_tokens})
    compiled = context_compile(project=target, params=params)
    text = frame(compiled.markdown if compiled.items else "")
    caller = server.caller()
    with write_transaction():  # the turn spans the receipt only, as context_deliver's
        deliveries_held(project=target, held=compiled.quarantined)
        delivery_receipt(
            project=target,
            caller=caller,
            params=params,
            result=compiled,
            text=text,
            source="prompt",
        )
    return text


def _memory_text(server: McpRegistry, *, query: str, lead: str, nothing: str) -> str:
    """``lead``, then the memory compiled for ``query`` (``nothing`` when none matched),
    receipted by ``prompt_with_memory``."""
    return prompt_with_memory(server, query, lambda markdown: lead + (markdown or nothing))


def _register_briefing(server: McpRegistry) -> None:
    @add_prompt(
        server,
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
    ) -> str:
        component = text_mask(component)[0]  # never a secret in the prompt or its receipt
        return _memory_text(
            server,
            query=f"{component} architecture decision design invariant depends_on uses",
            lead=f"Brief me on the architecture of `{component}`: what it is, what it depends "
            "on, the decisions that shaped it and the invariants it must keep. Use only the "
            "memory below, cite the [ids], and say what is missing.\n\n",
            nothing=f"(memory holds nothing about {component} yet)",
        )


def _register_bug_context(server: McpRegistry) -> None:
    @add_prompt(
        server,
        name="bug-investigation-context",
        title="Bug investigation context",
        description=(
            "Context for investigating a symptom, assembled from compiled memory: related bug "
            "root causes, incidents, invariants and the facts of the components involved."
        ),
    )
    def bug_investigation_context(
        symptom: Annotated[str, Field(description="The observed symptom or error message.")],
    ) -> str:
        symptom = text_mask(symptom)[0]  # never a secret in the prompt or its receipt
        return _memory_text(
            server,
            query=f"{symptom} bug root cause incident invariant",
            lead=f"Investigate this symptom: {symptom}\n\nBefore changing code, check the "
            "memory below for earlier root causes, incidents and invariants of the "
            "components involved; cite the [ids] you rely on.\n\n",
            nothing="(memory holds nothing related yet)",
        )
