"""The MCP server: agents reach the same services as REST through the Model Context Protocol.

`build_server()` creates one MCPServer and lets each app add its tools, resources and prompts
through `<app>.mcp_tools.register(server)`. Everything here is glue every adapter shares: the
call guard (database connections closed around each call, domain errors turned into tool
errors the agent can read, crashes logged to stderr), the project of a call (the server's
`--project` unless the call names one) and the name the client gave in `initialize`, which
injection records carry. Tools never hold logic of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal, TypeVar

from django.db import close_old_connections
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic import Field

from memoryproject import __version__
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.projects import project_resolve

logger = logging.getLogger("memoryproject.mcp")

SERVER_NAME = "memoryproject"
UNKNOWN_CLIENT = "mcp-client"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

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
Every call acts on the server's default project unless you pass `project`."""

# The name the client sent in `initialize`, set per request by a server middleware so that
# tools, resources and prompts (which run in worker threads) can record who asked.
_client_name: ContextVar[str] = ContextVar("memoryproject_mcp_client", default=UNKNOWN_CLIENT)

T = TypeVar("T")

ProjectArg = Annotated[
    str | None,
    Field(
        description=(
            "Project slug (lowercase letters, digits, '-' and '_'). Omit to use the server's "
            "default project. Writes to a project that does not exist yet create it."
        ),
        max_length=64,
    ),
]


def timestamp_field(meaning: str) -> Any:
    """The Field of an ISO-8601 timestamp argument whose description says what it means."""
    return Field(
        description=f"{meaning} ISO-8601 with a timezone, e.g. 2026-04-20T09:30:00Z.",
        max_length=64,
    )


class MemoryServer(MCPServer):
    """An MCPServer that knows the default project of the calls it serves."""

    def __init__(self, *, default_project: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.default_project = default_project

    def project_for(self, slug: str | None, access: Literal["read", "write"]) -> Project:
        """The project a call acts on: the one it names, else the server's default.

        MCP over stdio is a trusted local caller (no API key): any project may be read, and a
        write to a project that does not exist yet creates it.
        """
        chosen = slug.strip() if isinstance(slug, str) and slug.strip() else self.default_project
        return project_resolve(slug=chosen, api_key=None, access=access)


async def _remember_client(
    ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Awaitable[Any]]
) -> Any:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    name = (getattr(info, "name", "") or "").strip() or UNKNOWN_CLIENT
    token = _client_name.set(name[:200])
    try:
        return await call_next(ctx)
    finally:
        _client_name.reset(token)


def current_client() -> str:
    """The client's name from `initialize` (e.g. "claude-code"), for injection records."""
    return _client_name.get()


@contextmanager
def _db_call() -> Iterator[None]:
    # Each worker thread holds its own connection; closing around each call keeps them
    # from piling up and drops any connection left broken by the previous call.
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def tool_call(
    name: str,
    call: Callable[[], dict[str, Any]],
    *,
    render: Callable[[dict[str, Any]], str],
) -> CallToolResult:
    """Run one tool body: structured content is the service's dict, text is `render(dict)`.

    A domain error becomes a tool error carrying its message (which names the field and the
    rule); anything unexpected is logged with its traceback on stderr and reported as a tool
    error, so the server keeps serving.
    """
    with _db_call():
        try:
            data = call()
        except ApplicationError as exc:
            raise ToolError(exc.message) from exc
        except (ToolError, MCPError):
            raise
        except Exception as exc:
            logger.exception("MCP tool %s failed", name)
            raise ToolError(
                f"{name} failed with an internal error ({type(exc).__name__}); "
                "the server log on stderr has the details"
            ) from exc
    return CallToolResult(
        content=[TextContent(type="text", text=render(data))], structured_content=data
    )


def resource_read(name: str, call: Callable[[], T]) -> T:
    """Run one resource body with the same guard; errors become readable resource errors."""
    with _db_call():
        try:
            return call()
        except ApplicationError as exc:
            raise ResourceError(exc.message) from exc
        except (ResourceError, MCPError):
            raise
        except Exception as exc:
            logger.exception("MCP resource %s failed", name)
            raise ResourceError(
                f"reading {name} failed with an internal error ({type(exc).__name__}); "
                "the server log on stderr has the details"
            ) from exc


def prompt_render(name: str, call: Callable[[], T]) -> T:
    """Run one prompt body; a domain error reaches the client as invalid params with its text."""
    with _db_call():
        try:
            return call()
        except ApplicationError as exc:
            raise MCPError(code=INVALID_PARAMS, message=exc.message) from exc
        except MCPError:
            raise
        except Exception:
            logger.exception("MCP prompt %s failed", name)
            raise


def build_server(
    *,
    default_project: str | None = None,
    log_level: LogLevel = "WARNING",
) -> MemoryServer:
    """The MCP server with every app's tools, resources and prompts registered."""
    from graph_app import mcp_tools as graph_tools
    from sessions_app import mcp_tools as session_tools

    server = MemoryServer(
        default_project=default_project,
        name=SERVER_NAME,
        title="memoryproject",
        description=(
            "Persistent, verified and auditable memory for LLM agents: trust-scored session "
            "context, a bi-temporal knowledge graph and a token-budgeted context compiler."
        ),
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level=log_level,
    )
    server.middleware.append(_remember_client)
    session_tools.register(server)
    graph_tools.register(server)
    return server
