"""`manage.py mcp_serve`: the MCP server over stdio (for local agents) or streamable HTTP.

Every call acts as an identity with the same projects and scopes as REST. Over stdio it is
chosen at start: an API key (``--api-key`` or the ``MEMORY_API_KEY`` environment variable), or
``--project P --scope read|write`` for a trusted local user of this machine; the project must
exist (``manage.py create_project``). Over streamable HTTP every request carries its own key
(``Authorization: Bearer <api key>``); refused keys are throttled.

Over stdio, stdout carries protocol messages only: this command prints nothing, and all
logging goes to stderr. Over HTTP it binds 127.0.0.1 unless told otherwise, refuses any other
address without ``--allow-remote`` (then put a TLS-terminating proxy in front: keys travel in
a header), and always checks the Host and Origin headers, so a web page cannot reach it
through DNS rebinding. Forwarded headers count from ``TRUSTED_PROXIES`` only
(memoryproject.proxies), as on REST: uvicorn's own handling of them is off.

As soon as its identity is checked (over HTTP, as it starts), the server compiles secret
screening's rules and loads the compiler index of the identity's projects (over HTTP, of every
project) in a background thread (``memoryproject.warmup``), the index from its snapshot when
there is one, while the main thread imports the MCP SDK, registers the tools and
answers the handshake: the agent's first compile finds it loaded, or waits for the load to end.
Until the thread starts this module has imported no MCP SDK, so the load overlaps that import.
``--no-warm``: each index loads on its first compile, the rules on the first screened text.

Over stdio this command runs in the back of a server in two processes (memoryproject.mcp_split):
manage.py forked it as it started, and the process the client started imports the SDK, answers
the handshake and sends each call here; this process sends the manifest of the tools and answers
the calls, never importing the SDK. ``--one-process`` serves stdio here, as over HTTP.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import os
import socket
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

from memoryproject.api_keys import KeyRefused, api_key_verify
from memoryproject.collector import start_up_settle
from memoryproject.errors import ApplicationError
from memoryproject.mcp_split import back_serve, back_socket
from memoryproject.migration_state import migrations_pending
from memoryproject.models import Scope
from memoryproject.projects import (
    Identity,
    LocalIdentity,
    project_get,
    project_resolve,
    validate_project_slug,
)
from memoryproject.warmup import warm_in_background

if TYPE_CHECKING:  # the MCP SDK is imported once the index load has begun (handle)
    from mcp.server.transport_security import TransportSecuritySettings

    from memoryproject.mcp import LogLevel

logger = logging.getLogger("memoryproject.mcp")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
API_KEY_ENV = "MEMORY_API_KEY"


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def transport_security_for(host: str, extra_hosts: list[str]) -> TransportSecuritySettings:
    """Host/Origin checks: loopback names always, plus the bind address and any named host."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = list(LOOPBACK_HOSTS)
    bind = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if bind not in names and bind not in ("0.0.0.0", "[::]"):
        names.append(bind)
    for extra in extra_hosts:
        if extra not in names:
            names.append(extra)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names] + names,
        allowed_origins=[
            f"{scheme}://{name}{port}"
            for name in names
            for scheme in ("http", "https")
            for port in (":*", "")
        ],
    )


def uvicorn_log_config() -> dict[str, Any]:
    """Uvicorn's logging with its access log on stderr too (it defaults to stdout)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    return config


class Command(BaseCommand):
    help = (
        "Serve memoryproject's tools, resources and prompts over MCP (stdio by default, or "
        "streamable HTTP). Over stdio choose an identity: MEMORY_API_KEY=<key> (or --api-key), "
        "or --project P --scope read|write. Example for Claude Code: claude mcp add "
        "memoryproject -- <path>/.venv/bin/python <path>/manage.py mcp_serve --project P "
        "--scope write"
    )
    # System checks may print to stdout, which belongs to the protocol.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--project",
            default=None,
            help=(
                "stdio: the project of a local identity (with --scope), or the default project "
                "among an API key's. It must exist (manage.py create_project)."
            ),
        )
        parser.add_argument(
            "--scope",
            choices=[Scope.READ, Scope.WRITE],
            default=None,
            help="stdio: run as the trusted local identity local:<project>/<scope>.",
        )
        parser.add_argument(
            "--api-key",
            default=None,
            help=(
                f"stdio: run as this API key (prefer the {API_KEY_ENV} environment variable: "
                "a command line is visible to other users of the machine)."
            ),
        )
        parser.add_argument(
            "--transport",
            choices=["stdio", "streamable-http"],
            default="stdio",
            help="stdio (default; the client starts this command) or streamable-http.",
        )
        parser.add_argument(
            "--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)."
        )
        parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765).")
        parser.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp).")
        parser.add_argument(
            "--allow-remote",
            action="store_true",
            help=(
                "HTTP: allow a non-loopback bind address. Put a TLS-terminating reverse proxy "
                "in front: API keys travel in the Authorization header."
            ),
        )
        parser.add_argument(
            "--allowed-host",
            action="append",
            default=[],
            help=(
                "Extra Host name accepted over HTTP (repeatable), e.g. the name a reverse proxy "
                "forwards. Loopback names and the bind address are always accepted."
            ),
        )
        parser.add_argument(
            "--no-warm",
            action="store_true",
            help="Load each project's compiler index on its first compile (and screening's "
            "rules on the first text screened), not in the background as the server starts.",
        )
        parser.add_argument(
            "--one-process",
            action="store_true",
            help="stdio: serve in this one process. By default the MCP SDK starts in this "
            "process and Django with the compiler index in a child beside it, so a new server "
            "answers sooner on a machine with two cores or more.",
        )
        parser.add_argument(
            "--log-level",
            choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
            default=None,
            help="Server log level on stderr (default WARNING for stdio, INFO for HTTP).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        back = back_socket()  # in the back of a stdio server in two processes (mcp_split)
        transport = options["transport"]
        port = options["port"]
        if not 0 < port < 65536:
            raise CommandError(f"--port: must be between 1 and 65535, got {port}")
        if transport != "stdio":
            self._check_http_options(options)
        # Calls run in the SDK's pool of worker threads (and key checks in others): no thread
        # keeps a connection between calls, whatever CONN_MAX_AGE gives the web workers.
        for alias in connections:
            connections.settings[alias]["CONN_MAX_AGE"] = 0
        self._check_migrations()
        log_level: LogLevel = options["log_level"] or (
            "WARNING" if transport == "stdio" else "INFO"
        )
        for name in ("memoryproject", "mcp"):
            logging.getLogger(name).setLevel(log_level)
        try:
            if transport == "stdio":
                raw_key, local, default_project, projects = self._stdio_identity(options)
                if not options["no_warm"]:
                    warm_in_background(projects)
                if back is not None:
                    self._serve_back(back, log_level, default_project, raw_key, local)
                    return
                from memoryproject.mcp import build_server  # the MCP SDK, the tools' modules

                server = build_server(
                    log_level=log_level,
                    default_project=default_project,
                    api_key=raw_key,
                    local=local,
                )
                start_up_settle()
                server.run("stdio")
            else:
                if back is not None:
                    back.close()  # the front waits for this process, which serves HTTP
                self._serve_http(options, log_level)
        except KeyboardInterrupt:
            pass
        finally:
            connections.close_all()

    def _serve_back(
        self,
        back: socket.socket,
        log_level: str,
        default_project: str | None,
        api_key: str | None,
        local: LocalIdentity | None,
    ) -> None:
        """The back of a stdio server in two processes: the tools' modules, their manifest
        sent to the front, each call answered until the front closes the socket."""
        from memoryproject.mcp_calls import call_run, manifest, registry_build

        registry = registry_build(default_project=default_project, api_key=api_key, local=local)
        start_up_settle()
        back_serve(back, manifest(registry), partial(call_run, registry), log_level=log_level)

    def _check_http_options(self, options: dict[str, Any]) -> None:
        for name in ("project", "scope", "api_key"):
            if options[name]:
                flag = "--" + name.replace("_", "-")
                raise CommandError(
                    f"{flag}: not used over streamable-http: each request's API key "
                    "(Authorization: Bearer <key>) chooses its identity and projects"
                )
        host = options["host"]
        if not is_loopback(host) and not options["allow_remote"]:
            raise CommandError(
                f"--host: {host} is not a loopback address; pass --allow-remote to serve "
                "beyond this machine, behind a TLS-terminating reverse proxy (API keys travel "
                "in a header)"
            )

    def _serve_http(self, options: dict[str, Any], log_level: LogLevel) -> None:
        if not options["no_warm"]:
            warm_in_background(None)
        import anyio
        import uvicorn  # over HTTP only: a stdio server starts without it

        from memoryproject.mcp import build_server
        from memoryproject.mcp_auth import FailedAuthThrottle
        from memoryproject.proxies import TrustedProxyHeaders

        host, port, path = options["host"], options["port"], options["path"]
        bind = f"[{host}]" if ":" in host and not host.startswith("[") else host
        server = build_server(log_level=log_level, http_url=f"http://{bind}:{port}{path}")
        logger.warning(
            "memoryproject MCP server on http://%s:%s%s (Authorization: Bearer <api key>)",
            bind,
            port,
            path,
        )
        app = server.streamable_http_app(
            streamable_http_path=path,
            transport_security=transport_security_for(host, options["allowed_host"]),
            host=host,
        )
        config = uvicorn.Config(
            TrustedProxyHeaders(FailedAuthThrottle(app)),
            host=host,
            port=port,
            log_level=log_level.lower(),
            log_config=uvicorn_log_config(),
            # Off: by default uvicorn believes X-Forwarded-For from any loopback peer (its
            # FORWARDED_ALLOW_IPS), so a local client could pose as any address.
            # TrustedProxyHeaders applies TRUSTED_PROXIES instead, the rule REST follows.
            proxy_headers=False,
        )
        start_up_settle()
        anyio.run(uvicorn.Server(config).serve)

    def _check_migrations(self) -> None:
        connection = connections[DEFAULT_DB_ALIAS]
        try:
            pending = migrations_pending(connection)
        except Exception as exc:
            raise CommandError(f"cannot open the database: {exc}") from exc
        finally:
            close_old_connections()
        if pending:
            raise CommandError(
                f"the database has {pending} unapplied migration(s); "
                "run `python manage.py migrate` first"
            )

    def _stdio_identity(
        self, options: dict[str, Any]
    ) -> tuple[str | None, LocalIdentity | None, str | None, list[str]]:
        """(raw API key, local identity, default project, the projects its calls reach by
        default) of a stdio server, checked now."""
        slug, scope = options["project"], options["scope"]
        raw_key, source = options["api_key"], "--api-key"
        if raw_key and scope:
            raise CommandError("--scope: not used with --api-key: the key has its own scope")
        if not raw_key and not scope:
            raw_key, source = os.environ.get(API_KEY_ENV, "").strip() or None, API_KEY_ENV
        try:
            if raw_key:
                identity: Identity = self._key(raw_key, source)
            elif scope:
                project = project_get(
                    validate_project_slug(slug) if slug else settings.MEMORY_DEFAULT_PROJECT
                )
                local = LocalIdentity(project=project.slug, scope=scope)
                return None, local, None, [project.slug]
            else:
                raise CommandError(
                    "no identity: pass --project P --scope read|write (a trusted local user), "
                    f"or an API key in {API_KEY_ENV} (or --api-key)"
                )
            default = project_resolve(slug=slug, api_key=identity, access="read") if slug else None
        except ApplicationError as exc:
            raise CommandError(f"--project: {exc.message.removeprefix('project: ')}") from exc
        finally:
            close_old_connections()
        if default is not None:
            return raw_key, None, default.slug, [default.slug]
        bound = getattr(identity, "bound_projects", ())
        return raw_key, None, None, [project.slug for project in bound]

    def _key(self, raw_key: str, source: str) -> Identity:
        try:
            return api_key_verify(raw_key)
        except KeyRefused as exc:
            raise CommandError(f"{source}: {exc}") from exc
