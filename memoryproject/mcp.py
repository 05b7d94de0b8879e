"""The MCP server: agents reach the same services as REST through the Model Context Protocol.

`build_server()` creates one MCPServer and lets each installed app that has an ``mcp_tools``
module add its tools, resources and prompts through `register(server)` (found at run time, so
this module imports no app). A tool is declared with `add_tool` from the same `Operation` as
its REST twin: the operation's input model is the tool's argument schema and its output model
the structured content; a prompt with `add_prompt`. Everything here is glue every adapter
shares: the call guard (database connections closed around each call, domain errors turned into
tool errors the agent can read, crashes logged to stderr), the identity of a call and its
project, and the name the client gave in `initialize`. Tools never hold logic of their own.

Every call acts as an identity, with the same rules as REST (memoryproject.projects): over
streamable HTTP the API key of the request (``Authorization: Bearer``, checked by the SDK
before any MCP message, see memoryproject.mcp_auth); over stdio the identity the server was
started with (an API key, checked again at every call so a revoked key stops at once, or a
local ``--project P --scope S``). Receipts record that identity in ``client`` and the
``initialize`` name beside it as ``client_reported``.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from django.apps import apps
from django.db import close_old_connections, connections
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, WithJsonSchema

from memoryproject import __version__
from memoryproject.api_keys import KeyRefused, api_key_verify
from memoryproject.contracts import Caller, Output
from memoryproject.domain.imports import imports_refused
from memoryproject.errors import ApplicationError, PermissionDeniedError
from memoryproject.mcp_auth import ApiKeyVerifier, auth_settings
from memoryproject.models import Project, ProjectAPIKey
from memoryproject.operations import Operation
from memoryproject.projects import Identity, LocalIdentity, project_resolve

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
Every call acts on your identity's default project unless you pass `project`."""

# The name the client sent in `initialize`, set per request by a server middleware so that
# tools, resources and prompts (which run in worker threads) can record who asked.
_client_name: ContextVar[str] = ContextVar("memoryproject_mcp_client", default=UNKNOWN_CLIENT)

T = TypeVar("T")
P = ParamSpec("P")
O = TypeVar("O", bound=Output)  # noqa: E741

# What a tool does to the world, as clients show it. Plans and loads write a receipt, so even
# they are not read-only.
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
IDEMPOTENT_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

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


class MemoryServer(MCPServer):
    """An MCPServer that knows who its calls act as, their default project and the operation
    behind each of its tools.

    ``api_key`` (a raw key) or ``local`` is the identity of a stdio server; over streamable
    HTTP each request's bearer key is (``api_key`` and ``local`` are then None)."""

    def __init__(
        self,
        *,
        default_project: str | None = None,
        api_key: str | None = None,
        local: LocalIdentity | None = None,
        **kwargs: Any,
    ) -> None:
        # The SDK makes a log handler with ``rich`` when it is installed (a development
        # dependency here), which ``logging.basicConfig`` then drops: Django's LOGGING has
        # given the root logger its handler already. Refused, ``rich`` (13 to 22 ms of a
        # start) is not loaded for nothing, as in a deployment without it.
        with imports_refused("rich"):
            super().__init__(**kwargs)
        self.default_project = default_project
        self.api_key = api_key
        self.local = local
        self.operations: dict[str, Operation[Any, Any]] = {}

    def identity(self) -> Identity:
        """Who the current call acts as (checked now: a key revoked since is refused)."""
        token = get_access_token()
        raw = token.token if token is not None else self.api_key
        if raw:
            try:
                return api_key_verify(raw)
            except KeyRefused as exc:
                raise ApplicationError(f"api_key: {exc}", field="api_key") from exc
        if self.local is not None:
            return self.local
        raise ApplicationError(
            "api_key: this call has no identity: send 'Authorization: Bearer <api key>', or "
            "start the server with --api-key / MEMORY_API_KEY or --project P --scope S",
            field="api_key",
        )

    def project_for(
        self,
        slug: str | None,
        access: Literal["read", "write"],
        identity: Identity | None = None,
    ) -> Project:
        """The project a call acts on: the one it names, else the server's default, else the
        identity's own, resolved for ``access`` exactly as REST resolves it."""
        chosen = slug.strip() if isinstance(slug, str) and slug.strip() else self.default_project
        who = identity if identity is not None else self.identity()
        return project_resolve(slug=chosen, api_key=who, access=access)

    def caller(self, identity: Identity | None = None) -> Caller:
        """The receipts' caller: channel ``mcp``, the authenticated identity and, labelled as
        self-reported, the client's ``initialize`` name."""
        who = identity if identity is not None else self.identity()
        return Caller(channel="mcp", client=who.label, client_reported=current_client())


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


def current_client() -> str:
    """The client's name from `initialize` (e.g. "claude-code"): self-reported, so receipts
    keep it apart from the authenticated identity."""
    return _client_name.get()


@contextmanager
def _db_call() -> Iterator[None]:
    # Each worker thread holds its own connection, and the SDK's thread pool may use many:
    # the connection is closed after every call whatever CONN_MAX_AGE says (it lets web
    # workers keep theirs), so they never pile up; one left broken is dropped before the call.
    close_old_connections()
    try:
        yield
    finally:
        connections.close_all()


def _guarded(
    label: str, action: str, call: Callable[[], T], error: type[ToolError | ResourceError]
) -> T:
    """Runs ``call`` with fresh database connections around it. A domain error becomes
    ``error`` carrying its message (which names the field and the rule); anything unexpected is
    logged with its traceback on stderr and reported as ``error``, so the server keeps serving.
    """
    with _db_call():
        try:
            return call()
        except ApplicationError as exc:
            raise error(exc.message) from exc
        except (ToolError, ResourceError, MCPError):
            raise
        except Exception as exc:
            logger.exception("%s failed", label)
            raise error(
                f"{action} failed with an internal error ({type(exc).__name__}); "
                "the server log on stderr has the details"
            ) from exc


def tool_call(
    name: str,
    call: Callable[[], O],
    *,
    render: Callable[[O], str],
) -> CallToolResult:
    """Run one tool body: structured content is the answer's JSON, text is `render(answer)`;
    errors become tool errors the agent can read."""
    data = _guarded(f"MCP tool {name}", name, call, ToolError)
    return CallToolResult(
        content=[TextContent(type="text", text=render(data))], structured_content=data.as_json()
    )


def _parameters(operation: Operation[Any, Any]) -> list[inspect.Parameter]:
    """The tool's parameters: the operation's input fields (their JSON schema as published, so
    descriptions, defaults and bounds are the input model's), then ``project``. The SDK only
    checks JSON types; the input model validates, with the same errors as REST."""
    schema = operation.input.model_json_schema()
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        field = operation.input.model_fields[name]
        plain = field.annotation if field.annotation in (str, str | None) else Any
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[plain, WithJsonSchema(prop)],
                default=inspect.Parameter.empty if name in required else prop.get("default"),
            )
        )
    project = SpanningProjectArg if operation.spans_projects else ProjectArg
    params.append(
        inspect.Parameter(
            "project", inspect.Parameter.KEYWORD_ONLY, annotation=project, default=None
        )
    )
    return params


def add_tool(
    server: MemoryServer,
    operation: Operation[Any, O],
    *,
    title: str,
    description: str,
    annotations: ToolAnnotations,
    render: Callable[[O], str],
) -> None:
    """Registers ``operation`` as the tool of its name: arguments parsed by its input model,
    the project resolved for the call's identity with the operation's access and scope (as
    REST does; an operation spanning the identity's projects gets None unless one is named),
    receipts naming channel ``mcp``, the identity and the client's self-reported name."""

    def call(**arguments: Any) -> CallToolResult:
        def run() -> O:
            identity = server.identity()
            if operation.scope is not None and not identity.allows(operation.scope):
                # As REST's permission says it (a write's scope is checked with its project).
                kind = "API key" if isinstance(identity, ProjectAPIKey) else "local identity"
                raise PermissionDeniedError(
                    f"this {kind} has scope '{identity.scope}'; this call needs scope "
                    f"'{operation.scope}'"
                )
            slug = arguments.pop("project", None)
            named = isinstance(slug, str) and bool(slug.strip())
            project = (
                None
                if operation.spans_projects and not named
                else server.project_for(slug, operation.access, identity)
            )
            params = operation.parse(arguments)
            return operation(
                project=project, params=params, caller=server.caller(identity), identity=identity
            )

        return tool_call(operation.name, run, render=render)

    call.__name__ = operation.name
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        _parameters(operation),
        return_annotation=Annotated[CallToolResult, operation.output],
    )
    server.add_tool(
        call, name=operation.name, title=title, description=description, annotations=annotations
    )
    server.operations[operation.name] = operation


#: A tool as ``add_tools`` registers it: its operation, title, description, hints and renderer.
ToolSpec = tuple[Operation[Any, Any], str, str, ToolAnnotations, Callable[[Any], str]]


def add_tools(server: MemoryServer, tools: Iterable[ToolSpec]) -> None:
    """Registers each of ``tools`` with ``add_tool``."""
    for operation, title, description, hints, render in tools:
        add_tool(
            server,
            operation,
            title=title,
            description=description,
            annotations=hints,
            render=render,
        )


def resource_read(name: str, call: Callable[[], T]) -> T:
    """Run one resource body with the same guard; errors become readable resource errors."""
    return _guarded(f"MCP resource {name}", f"reading {name}", call, ResourceError)


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


def add_prompt(
    server: MemoryServer, *, name: str, title: str, description: str
) -> Callable[[Callable[P, str]], Callable[P, str]]:
    """Registers the decorated function as the prompt ``name``: its parameters are the
    prompt's arguments and the text it answers the one user message, run as
    ``prompt_render`` runs a prompt body."""

    def register(text: Callable[P, str]) -> Callable[P, str]:
        @functools.wraps(text)
        def message(*args: P.args, **kwargs: P.kwargs) -> str:
            return prompt_render(name, lambda: text(*args, **kwargs))

        server.prompt(name=name, title=title, description=description)(message)
        return text

    return register


def build_server(
    *,
    default_project: str | None = None,
    log_level: LogLevel = "WARNING",
    api_key: str | None = None,
    local: LocalIdentity | None = None,
    http_url: str | None = None,
) -> MemoryServer:
    """The MCP server with every app's tools, resources and prompts registered.

    Over stdio it acts as ``api_key`` or ``local``; with ``http_url`` (the streamable HTTP
    endpoint) every request must carry a bearer API key instead."""
    auth: dict[str, Any] = {}
    if http_url is not None:
        auth = {"token_verifier": ApiKeyVerifier(), "auth": auth_settings(http_url)}
        api_key, local = None, None
    server = MemoryServer(
        default_project=default_project,
        api_key=api_key,
        local=local,
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
    for app in apps.get_app_configs():
        module = f"{app.name}.mcp_tools"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module).register(server)
    return server
