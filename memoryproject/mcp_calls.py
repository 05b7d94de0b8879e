"""What the MCP server's tools, resources and prompts do, without the MCP SDK.

Each installed app that has an ``mcp_tools`` module adds its tools, resources and prompts to a
`McpRegistry` through `register(registry)` (found at run time, so this module imports no app).
A tool is declared with `add_tool` from the same `Operation` as its REST twin: the operation's
input model gives the tool's arguments, its output model the structured content; a prompt with
`add_prompt`, a resource with `McpRegistry.resource`.

The registry answers two things: its `manifest` (every tool, resource and prompt as JSON: what
the SDK publishes) and `call_run` (one call, named in a JSON request, answered in JSON). The SDK
side (memoryproject.mcp_server) registers the manifest and sends each call to `call_run`, in
the same process (memoryproject.mcp.build_server) or, for a stdio server, in the process beside
it that holds Django and the compiler index (memoryproject.mcp_split): that process never
imports the SDK, so the two start side by side.

Everything here is glue every adapter shares: the call guard (database connections closed
around each call, domain errors turned into errors the agent can read, crashes logged to
stderr), the identity of a call and its project, and the name the client gave in
`initialize`. Tools never hold logic of their own.

Every call acts as an identity, with the same rules as REST (memoryproject.projects): over
streamable HTTP the API key of the request (``Authorization: Bearer``, checked by the SDK before
any MCP message and carried in the call as ``token``, see memoryproject.mcp_auth); over stdio
the identity the server was started with (an API key, checked again at every call so a revoked
key stops at once, or a local ``--project P --scope S``). Receipts record that identity in
``client`` and the ``initialize`` name beside it as ``client_reported``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import logging
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar

from django.apps import apps
from django.db import close_old_connections, connections

from memoryproject.api_keys import KeyRefused, api_key_verify
from memoryproject.contracts import Caller, Output
from memoryproject.errors import ApplicationError, PermissionDeniedError
from memoryproject.models import Project, ProjectAPIKey
from memoryproject.operations import Operation
from memoryproject.projects import Identity, LocalIdentity, project_resolve
from memoryproject.schema_cache import json_schemas, model_name

logger = logging.getLogger("memoryproject.mcp")

T = TypeVar("T")
P = ParamSpec("P")
O = TypeVar("O", bound=Output)  # noqa: E741

# The call being run: the client's name from `initialize` (as the SDK side names it, see
# memoryproject.mcp_server) and, over HTTP, the request's key.
_client_name: ContextVar[str] = ContextVar("memoryproject_mcp_call_client")
_token: ContextVar[str | None] = ContextVar("memoryproject_mcp_token", default=None)


@dataclass(frozen=True)
class ToolHints:
    """What a tool does to the world, as clients show it (MCP's tool annotations)."""

    read_only: bool
    destructive: bool = False
    idempotent: bool = False

    def as_json(self) -> dict[str, bool]:
        if self.read_only:
            return {"readOnlyHint": True, "openWorldHint": False}
        return {
            "readOnlyHint": False,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": False,
        }


# Plans and loads write a receipt, so even they are not read-only.
READ = ToolHints(read_only=True)
WRITE = ToolHints(read_only=False)
IDEMPOTENT_WRITE = ToolHints(read_only=False, idempotent=True)
DESTRUCTIVE = ToolHints(read_only=False, destructive=True)


class CallFailed(Exception):
    """A call's answer is an error the client reads: ``invalid`` (a prompt's arguments or the
    domain refused them) or ``failed`` (anything else)."""

    def __init__(self, message: str, *, kind: Literal["invalid", "failed"] = "failed"):
        super().__init__(message)
        self.message, self.kind = message, kind


@dataclass(frozen=True)
class Tool:
    operation: Operation[Any, Any]
    title: str
    description: str
    hints: ToolHints
    render: Callable[[Any], str]


@dataclass(frozen=True)
class Resource:
    name: str
    title: str
    description: str
    mime_type: str
    read: Callable[[], str]


@dataclass(frozen=True)
class Prompt:
    title: str
    description: str
    text: Callable[..., str]


@dataclass
class McpRegistry:
    """The tools, resources and prompts every app registered, and who their calls act as.

    ``api_key`` (a raw key) or ``local`` is the identity of a stdio server; over streamable
    HTTP each call's bearer key is (``api_key`` and ``local`` are then None)."""

    default_project: str | None = None
    api_key: str | None = None
    local: LocalIdentity | None = None
    tools: dict[str, Tool] = field(default_factory=dict)
    resources: dict[str, Resource] = field(default_factory=dict)
    prompts: dict[str, Prompt] = field(default_factory=dict)

    @property
    def operations(self) -> dict[str, Operation[Any, Any]]:
        return {name: tool.operation for name, tool in self.tools.items()}

    def identity(self) -> Identity:
        """Who the current call acts as (checked now: a key revoked since is refused)."""
        raw = _token.get() or self.api_key
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

    def resource(
        self, uri: str, *, name: str, title: str, description: str, mime_type: str
    ) -> Callable[[Callable[[], str]], Callable[[], str]]:
        """Registers the decorated function as the resource at ``uri``: the text it answers,
        run with the call guard."""

        def register(read: Callable[[], str]) -> Callable[[], str]:
            self.resources[uri] = Resource(name, title, description, mime_type, read)
            return read

        return register


def current_client() -> str:
    """The client's name from `initialize` (e.g. "claude-code"): self-reported, so receipts
    keep it apart from the authenticated identity."""
    return _client_name.get()


@contextmanager
def _db_call() -> Iterator[None]:
    # Each worker thread holds its own connection, and calls run in a pool of threads that may
    # use many: the connection is closed after every call whatever CONN_MAX_AGE says (it lets
    # web workers keep theirs), so they never pile up; one left broken is dropped before it.
    close_old_connections()
    try:
        yield
    finally:
        connections.close_all()


def _guarded(label: str, action: str, call: Callable[[], T]) -> T:
    """Runs ``call`` with fresh database connections around it. A domain error becomes
    ``CallFailed`` carrying its message (which names the field and the rule); anything
    unexpected is logged with its traceback on stderr and reported as ``CallFailed``, so the
    server keeps serving."""
    with _db_call():
        try:
            return call()
        except ApplicationError as exc:
            raise CallFailed(exc.message, kind="invalid") from exc
        except CallFailed:
            raise
        except Exception as exc:
            logger.exception("%s failed", label)
            raise CallFailed(
                f"{action} failed with an internal error ({type(exc).__name__}); "
                "the server log on stderr has the details"
            ) from exc


def add_tool(
    registry: McpRegistry,
    operation: Operation[Any, O],
    *,
    title: str,
    description: str,
    annotations: ToolHints,
    render: Callable[[O], str],
) -> None:
    """Registers ``operation`` as the tool of its name."""
    registry.tools[operation.name] = Tool(operation, title, description, annotations, render)


#: A tool as ``add_tools`` registers it: its operation, title, description, hints and renderer.
ToolSpec = tuple[Operation[Any, Any], str, str, ToolHints, Callable[[Any], str]]


def add_tools(registry: McpRegistry, tools: Iterable[ToolSpec]) -> None:
    """Registers each of ``tools`` with ``add_tool``."""
    for operation, title, description, hints, render in tools:
        add_tool(
            registry,
            operation,
            title=title,
            description=description,
            annotations=hints,
            render=render,
        )


def add_prompt(
    registry: McpRegistry, *, name: str, title: str, description: str
) -> Callable[[Callable[P, str]], Callable[P, str]]:
    """Registers the decorated function as the prompt ``name``: its parameters (each ``str``,
    described with ``Field(description=...)``) are the prompt's arguments and the text it
    answers the one user message, run with the call guard."""

    def register(text: Callable[P, str]) -> Callable[P, str]:
        registry.prompts[name] = Prompt(title, description, text)
        return text

    return register


def _tool_answer(registry: McpRegistry, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Runs ``tool``: arguments parsed by its input model, the project resolved for the call's
    identity with the operation's access and scope (as REST does; an operation spanning the
    identity's projects gets None unless one is named), receipts naming channel ``mcp``, the
    identity and the client's self-reported name."""
    operation = tool.operation

    def run() -> Output:
        identity = registry.identity()
        if operation.scope is not None and not identity.allows(operation.scope):
            # As REST's permission says it (a write's scope is checked with its project).
            kind = "API key" if isinstance(identity, ProjectAPIKey) else "local identity"
            raise PermissionDeniedError(
                f"this {kind} has scope '{identity.scope}'; this call needs scope "
                f"'{operation.scope}'"
            )
        values = dict(arguments)
        slug = values.pop("project", None)
        named = isinstance(slug, str) and bool(slug.strip())
        project = (
            None
            if operation.spans_projects and not named
            else registry.project_for(slug, operation.access, identity)
        )
        params = operation.parse(values)
        return operation(
            project=project, params=params, caller=registry.caller(identity), identity=identity
        )

    data = _guarded(f"MCP tool {operation.name}", operation.name, run)
    return {"text": tool.render(data), "structured": data.as_json()}


def call_run(registry: McpRegistry, request: dict[str, Any]) -> dict[str, Any]:
    """Answers one call: ``request`` names its ``kind`` (tool, resource or prompt), ``name``,
    ``arguments``, the ``client``'s ``initialize`` name and, over HTTP, the request's bearer
    ``token``. The answer is ``{"text": ...}`` (a tool's also with ``structured``), or
    ``{"error": "invalid" | "failed" | "unknown", "message": ...}``."""
    client = _client_name.set(str(request["client"]))
    token = _token.set(request.get("token") or None)
    try:
        kind, name = request.get("kind"), str(request.get("name"))
        arguments = request.get("arguments") or {}
        if kind == "tool" and name in registry.tools:
            return _tool_answer(registry, registry.tools[name], arguments)
        if kind == "resource" and name in registry.resources:
            read = registry.resources[name].read
            return {"text": _guarded(f"MCP resource {name}", f"reading {name}", read)}
        if kind == "prompt" and name in registry.prompts:
            text = functools.partial(registry.prompts[name].text, **arguments)
            return {"text": _guarded(f"MCP prompt {name}", f"prompt {name}", text)}
        return {"error": "unknown", "message": f"unknown {kind}: {name}"}
    except CallFailed as exc:
        return {"error": exc.kind, "message": exc.message}
    finally:
        _token.reset(token)
        _client_name.reset(client)


def _tool_manifest(name: str, tool: Tool, schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A tool as the SDK side registers it: the input model's fields (their JSON schema as
    published, so descriptions, defaults and bounds are the input model's; ``kind`` says
    whether the SDK may check the value is a string), whether ``project`` narrows a call that
    spans projects, and the output model's schema (``schemas``: each model's, by name)."""
    operation = tool.operation
    schema = schemas[model_name(operation.input)]
    required = set(schema.get("required", []))
    params = []
    for field_name, prop in schema.get("properties", {}).items():
        annotation = operation.input.model_fields[field_name].annotation
        kind = "str" if annotation is str else "str?" if annotation == str | None else "any"
        params.append(
            {
                "name": field_name,
                "schema": prop,
                "kind": kind,
                "required": field_name in required,
                "default": prop.get("default"),
            }
        )
    return {
        "name": name,
        "title": tool.title,
        "description": tool.description,
        "annotations": tool.hints.as_json(),
        "params": params,
        "spans_projects": operation.spans_projects,
        "output_schema": schemas[model_name(operation.output)],
    }


def _prompt_arguments(text: Callable[..., str]) -> list[dict[str, Any]]:
    """A prompt's arguments from its function's parameters: each a string, described by the
    ``Field`` in its annotation, required unless it has a default."""
    arguments = []
    hints = typing.get_type_hints(text, include_extras=True)
    for name, parameter in inspect.signature(text).parameters.items():
        description = next(
            (m.description for m in getattr(hints[name], "__metadata__", ()) if m.description),
            None,
        )
        arguments.append(
            {
                "name": name,
                "description": description,
                "required": parameter.default is inspect.Parameter.empty,
            }
        )
    return arguments


def manifest(registry: McpRegistry) -> dict[str, Any]:
    """Every tool, resource and prompt of ``registry`` as JSON (what the SDK side publishes);
    the models' JSON schemas as kept from an earlier start of the same code when they were
    (memoryproject.schema_cache)."""
    models = [m for t in registry.tools.values() for m in (t.operation.input, t.operation.output)]
    schemas = json_schemas(models)
    return {
        "tools": [_tool_manifest(name, tool, schemas) for name, tool in registry.tools.items()],
        "resources": [
            {
                "uri": uri,
                "name": r.name,
                "title": r.title,
                "description": r.description,
                "mime_type": r.mime_type,
            }
            for uri, r in registry.resources.items()
        ],
        "prompts": [
            {
                "name": name,
                "title": p.title,
                "description": p.description,
                "arguments": _prompt_arguments(p.text),
            }
            for name, p in registry.prompts.items()
        ],
    }


def registry_build(
    *,
    default_project: str | None = None,
    api_key: str | None = None,
    local: LocalIdentity | None = None,
) -> McpRegistry:
    """The registry with every installed app's tools, resources and prompts."""
    registry = McpRegistry(default_project=default_project, api_key=api_key, local=local)
    for app in apps.get_app_configs():
        module = f"{app.name}.mcp_tools"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module).register(registry)
    return registry
