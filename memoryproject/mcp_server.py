"""The MCP server on the SDK's side: it publishes a manifest of tools, resources and prompts
(memoryproject.mcp_calls.manifest) and sends each call to an executor that answers it.

This module imports the MCP SDK and pydantic, never Django: the same code serves a server in
one process (memoryproject.mcp.build_server, whose executor runs the call in place) and the
front of a stdio server whose calls run in the process beside it (memoryproject.mcp_split).
What it adds to the manifest is the SDK's part: the tools' argument signatures (so the SDK
publishes and checks them as it would for a function), the ``project`` argument every tool
takes, the client's ``initialize`` name and, over HTTP, the request's bearer key carried in
each call, and the answers and errors turned into MCP results.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import Field, WithJsonSchema

from memoryproject import __version__
from memoryproject.domain.imports import imports_refused

SERVER_NAME = "memoryproject"
UNKNOWN_CLIENT = "mcp-client"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

#: Answers one call (memoryproject.mcp_calls.call_run's request and answer).
Executor = Callable[[dict[str, Any]], dict[str, Any]]

INSTRUCTIONS = """\
memoryproject gives you persistent, verified memory across sessions and tools.
- Start of a session: call load_session (your last saved summary, only if trustworthy and
  recent) or plan_context (context extracted from recent traces, trust-scored).
- Before a task: call memory_compile_context with the task as query; it returns the most
  relevant facts and decisions under a token budget, each line citing its source.
- When you learn something durable: memory_record_episode (ADRs, bug root causes,
  invariants, incidents) and memory_upsert_fact (one current truth per subject and predicate;
  the old value is kept as history, never deleted).
- End of a session: save_session with a structured summary (active project, last decision,
  current output, open questions, key files).
Every call acts on your identity's default project unless you pass `project`."""

# The name the client sent in `initialize`, set per request by a server middleware so that
# tools, resources and prompts (which run in worker threads) can say who asked.
_client_name: ContextVar[str] = ContextVar("memoryproject_mcp_client", default=UNKNOWN_CLIENT)

ProjectArg = Annotated[
    str | None,
    Field(
        description=(
            "Project slug (lowercase letters, digits, '-', '_' and '.'). Omit to use your "
            "identity's default project. Only projects your API key (or the server's local "
            "identity) is bound to; none is ever created by a call."
        ),
        max_length=64,
    ),
]

#: ``project`` of a tool spanning every project the identity may read.
SpanningProjectArg = Annotated[
    str | None,
    Field(
        description=(
            "Project slug: narrows the answer to this one of the projects your API key (or "
            "the server's local identity) is bound to. Omit to cover all of them."
        ),
        max_length=64,
    ),
]

# What the SDK may check of an argument's value before the input model does.
_PLAIN: dict[str, Any] = {"str": str, "str?": str | None, "any": Any}


class MemoryServer(MCPServer):
    """An MCPServer whose tools, resources and prompts come from a manifest, each call
    answered by ``executor``."""

    def __init__(self, *, executor: Executor, **kwargs: Any) -> None:
        # The SDK makes a log handler with ``rich`` when it is installed (a development
        # dependency here): in one process ``logging.basicConfig`` then drops it (Django's
        # LOGGING has given the root logger its handler already), and the front of a stdio
        # server logs plain lines on stderr as a deployment without ``rich`` does. Refused, it
        # is not loaded for nothing (13 to 22 ms of a start).
        with imports_refused("rich"):
            super().__init__(**kwargs)
        self.executor = executor
        #: Each tool's output schema: its output model's, whose JSON the structured content is.
        self.output_schemas: dict[str, dict[str, Any]] = {}
        #: The registry its calls run on, when they run in this process (mcp.build_server).
        self.registry: Any = None

    async def list_tools(self) -> list[MCPTool]:
        """The tools, each with its output model's schema (the SDK sees a CallToolResult)."""
        return [
            tool.model_copy(update={"output_schema": self.output_schemas[tool.name]})
            if tool.name in self.output_schemas
            else tool
            for tool in await super().list_tools()
        ]

    def run_call(self, kind: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The executor's answer to one call, with the client's name and the request's key."""
        token = get_access_token()
        return self.executor(
            {
                "kind": kind,
                "name": name,
                "arguments": arguments,
                "client": _client_name.get(),
                "token": token.token if token is not None else None,
            }
        )


async def _remember_client(
    ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Awaitable[Any]]
) -> Any:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    name = str(getattr(info, "name", "") or "")
    # Printable text only (no NUL or control characters, which receipts refuse).
    name = "".join(ch for ch in name if ch.isprintable()).strip() or UNKNOWN_CLIENT
    token = _client_name.set(name[:200])
    try:
        return await call_next(ctx)
    finally:
        _client_name.reset(token)


def _parameters(spec: dict[str, Any]) -> list[inspect.Parameter]:
    """The tool's parameters: the input model's fields as the manifest publishes them, then
    ``project``. The SDK only checks JSON types; the input model validates, with the same
    errors as REST."""
    params = []
    for param in spec["params"]:
        plain, published = _PLAIN[param["kind"]], WithJsonSchema(param["schema"])
        params.append(
            inspect.Parameter(
                param["name"],
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[plain, published],
                default=inspect.Parameter.empty if param["required"] else param["default"],
            )
        )
    project = SpanningProjectArg if spec["spans_projects"] else ProjectArg
    params.append(
        inspect.Parameter(
            "project", inspect.Parameter.KEYWORD_ONLY, annotation=project, default=None
        )
    )
    return params


def _add_tool(server: MemoryServer, spec: dict[str, Any]) -> None:
    name = spec["name"]

    def call(**arguments: Any) -> CallToolResult:
        answer = server.run_call("tool", name, arguments)
        if "error" in answer:
            raise ToolError(answer["message"])
        return CallToolResult(
            content=[TextContent(type="text", text=answer["text"])],
            structured_content=answer["structured"],
        )

    call.__name__ = name
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        _parameters(spec), return_annotation=CallToolResult
    )
    server.add_tool(
        call,
        name=name,
        title=spec["title"],
        description=spec["description"],
        annotations=ToolAnnotations.model_validate(spec["annotations"]),
    )
    server.output_schemas[name] = spec["output_schema"]


def _add_resource(server: MemoryServer, spec: dict[str, Any]) -> None:
    uri = spec["uri"]

    def read() -> str:
        answer = server.run_call("resource", uri, {})
        if "error" in answer:
            raise ResourceError(answer["message"])
        return str(answer["text"])

    server.resource(
        uri,
        name=spec["name"],
        title=spec["title"],
        description=spec["description"],
        mime_type=spec["mime_type"],
    )(read)


def _add_prompt(server: MemoryServer, spec: dict[str, Any]) -> None:
    name = spec["name"]

    def message(**arguments: Any) -> str:
        answer = server.run_call("prompt", name, arguments)
        if answer.get("error") == "invalid":
            raise MCPError(code=INVALID_PARAMS, message=answer["message"])
        if "error" in answer:
            raise RuntimeError(f"prompt {name} failed: {answer['message']}")
        return str(answer["text"])

    message.__name__ = name.replace("-", "_")
    parameters = []
    for argument in spec["arguments"]:
        required = bool(argument["required"])
        plain, described = (
            str if required else str | None,
            Field(description=argument["description"]),
        )
        parameters.append(
            inspect.Parameter(
                argument["name"],
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[plain, described],
                default=inspect.Parameter.empty if required else None,
            )
        )
    message.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        parameters, return_annotation=str
    )
    # The SDK validates a prompt's arguments from its annotations.
    message.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": str}
    server.prompt(name=name, title=spec["title"], description=spec["description"])(message)


def server_build(
    manifest: dict[str, Any],
    executor: Executor,
    *,
    log_level: LogLevel = "WARNING",
    **auth: Any,
) -> MemoryServer:
    """The MCP server publishing ``manifest``, each call answered by ``executor``; ``auth``:
    the SDK's ``token_verifier`` and ``auth`` settings of a server over streamable HTTP."""
    server = MemoryServer(
        executor=executor,
        name=SERVER_NAME,
        title="memoryproject",
        description=(
            "Persistent, verified and auditable memory for LLM agents: trust-scored session "
            "context, a bi-temporal knowledge graph and a token-budgeted context compiler."
        ),
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level=log_level,
        **auth,
    )
    server.middleware.append(_remember_client)
    for tool in manifest["tools"]:
        _add_tool(server, tool)
    for resource in manifest["resources"]:
        _add_resource(server, resource)
    for prompt in manifest["prompts"]:
        _add_prompt(server, prompt)
    return server
