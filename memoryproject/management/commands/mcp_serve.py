"""`manage.py mcp_serve`: the MCP server over stdio (for local agents) or streamable HTTP.

Over stdio, stdout carries protocol messages only: this command prints nothing, and all
logging goes to stderr. Over HTTP it binds 127.0.0.1 unless told otherwise and always checks
the Host and Origin headers, so a web page cannot reach it through DNS rebinding.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import anyio
import uvicorn
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections
from django.db.migrations.executor import MigrationExecutor
from mcp.server.transport_security import TransportSecuritySettings
from uvicorn.config import LOGGING_CONFIG

from memoryproject.errors import ApplicationError
from memoryproject.mcp import LogLevel, build_server
from memoryproject.projects import project_resolve

logger = logging.getLogger("memoryproject.mcp")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def transport_security_for(host: str, extra_hosts: list[str]) -> TransportSecuritySettings:
    """Host/Origin checks: loopback names always, plus the bind address and any named host."""
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
    config = copy.deepcopy(LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    return config


class Command(BaseCommand):
    help = (
        "Serve memoryproject's tools, resources and prompts over MCP (stdio by default, or "
        "streamable HTTP). Example for Claude Code: claude mcp add memoryproject -- "
        "<path>/.venv/bin/python <path>/manage.py mcp_serve"
    )
    # System checks may print to stdout, which belongs to the protocol.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--project",
            default=None,
            help="Default project for calls that do not name one (default: MEMORY_DEFAULT_PROJECT).",
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
            "--allowed-host",
            action="append",
            default=[],
            help=(
                "Extra Host name accepted over HTTP (repeatable), e.g. the name a reverse proxy "
                "forwards. Loopback names and the bind address are always accepted."
            ),
        )
        parser.add_argument(
            "--log-level",
            choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
            default=None,
            help="Server log level on stderr (default WARNING for stdio, INFO for HTTP).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        transport = options["transport"]
        port = options["port"]
        if not 0 < port < 65536:
            raise CommandError(f"--port: must be between 1 and 65535, got {port}")
        self._check_migrations()
        default_project = self._prepare_project(options["project"])
        log_level: LogLevel = options["log_level"] or (
            "WARNING" if transport == "stdio" else "INFO"
        )
        for name in ("memoryproject", "mcp"):
            logging.getLogger(name).setLevel(log_level)

        server = build_server(default_project=default_project, log_level=log_level)
        try:
            if transport == "stdio":
                server.run("stdio")
            else:
                host = options["host"]
                logger.warning(
                    "memoryproject MCP server on http://%s:%s%s (project %s)",
                    host,
                    port,
                    options["path"],
                    default_project or "default",
                )
                app = server.streamable_http_app(
                    streamable_http_path=options["path"],
                    transport_security=transport_security_for(host, options["allowed_host"]),
                    host=host,
                )
                config = uvicorn.Config(
                    app,
                    host=host,
                    port=port,
                    log_level=log_level.lower(),
                    log_config=uvicorn_log_config(),
                )
                anyio.run(uvicorn.Server(config).serve)
        except KeyboardInterrupt:
            pass
        finally:
            connections.close_all()

    def _check_migrations(self) -> None:
        connection = connections[DEFAULT_DB_ALIAS]
        try:
            executor = MigrationExecutor(connection)
            pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        except Exception as exc:
            raise CommandError(f"cannot open the database: {exc}") from exc
        finally:
            close_old_connections()
        if pending:
            raise CommandError(
                f"the database has {len(pending)} unapplied migration(s); "
                "run `python manage.py migrate` first"
            )

    def _prepare_project(self, slug: str | None) -> str | None:
        if slug is None:
            return None
        try:
            # A trusted local server: naming a new project creates it, so reads work at once.
            project = project_resolve(slug=slug, api_key=None, access="write")
        except ApplicationError as exc:
            raise CommandError(f"--project: {exc.message.removeprefix('project: ')}") from exc
        finally:
            close_old_connections()
        return project.slug
