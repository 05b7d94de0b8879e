"""`manage.py install_claude_code`: makes memoryproject Claude Code's replacement for /compact.

    manage.py install_claude_code --project-dir DIR [--project SLUG] [--env NAME=VALUE ...]
                                  [--force] [--dry-run] [--json]

It renders the files of ``integrations/claude-code/`` with this checkout's absolute paths and
merges them into the Claude Code project at DIR:

- ``.mcp.json``: the ``memoryproject`` entry of ``mcpServers`` (``mcp_serve --project SLUG
  --scope write``: the local user's agent acts on that one project);
- ``.claude/settings.json``: a ``SessionStart`` hook running ``load_session --format text``,
  whose output Claude Code adds to the new session's context;
- ``.claude/commands/save.md``: the ``/save`` slash command, which has the agent write the
  structured summary and store it with the MCP tool ``save_session``.

The memory project itself is created when it does not exist yet (the server refuses to start
on a project that does not exist). Every other key of those files is kept as it was; a
``save.md`` that this installer did not write is kept unless ``--force``. A second run changes nothing and says so. Files are checked
before anything is written: a settings file that is not valid JSON stops the run (exit 2) with
nothing written.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError
from django.utils.text import slugify

from memoryproject.command_output import json_flag_add
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.projects import validate_project_slug
from memoryproject.services import project_create

SERVER = "memoryproject"
TEMPLATES = Path(settings.BASE_DIR) / "integrations" / "claude-code"
#: Written into save.md: a file carrying it is ours to replace on a reinstall.
MARKER = "installed by memoryproject"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
MCP_FILE = ".mcp.json"
SETTINGS_FILE = ".claude/settings.json"
COMMAND_FILE = ".claude/commands/save.md"


@dataclass(frozen=True)
class Change:
    file: str
    key: str
    action: str  # created, added, updated, unchanged or kept (a file we do not own)

    @property
    def changes(self) -> bool:
        return self.action not in ("unchanged", "kept")


@dataclass(frozen=True)
class Target:
    """What the rendered files point at: this checkout, the project slug, the environment."""

    python: str
    manage: str
    project: str
    env: dict[str, str]

    def values(self, *, shell: bool) -> dict[str, Any]:
        def quote(value: str) -> str:
            return shlex.quote(value) if shell else value

        env: Any = "".join(f"{name}={quote(v)} " for name, v in self.env.items())
        return {
            "server": SERVER,
            "python": quote(self.python),
            "manage": quote(self.manage),
            "project": quote(self.project),
            "env": env if shell else dict(self.env),
        }

    @property
    def hook_marker(self) -> str:
        """What identifies our hook among the project's others: this checkout's load_session."""
        return f"{shlex.quote(self.manage)} load_session"


def render(value: Any, values: dict[str, Any]) -> Any:
    """The template with each ``{{name}}`` replaced; a string that is exactly one placeholder
    takes the value itself (so ``"{{env}}"`` can become an object)."""
    if isinstance(value, dict):
        return {render(k, values): render(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [render(item, values) for item in value]
    if not isinstance(value, str):
        return value
    whole = PLACEHOLDER.fullmatch(value)
    if whole and whole[1] in values:
        return values[whole[1]]
    # One pass, so a value that happens to contain "{{...}}" is never expanded again.
    return PLACEHOLDER.sub(lambda m: str(values.get(m[1], m[0])), value)


def _template(name: str, values: dict[str, Any]) -> Any:
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    return render(json.loads(text) if name.endswith(".json") else text, values)


def _read_object(path: Path, rel: str) -> dict[str, Any] | None:
    """The JSON object in ``path`` (None when the file does not exist)."""
    if not path.exists():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        raise ApplicationError(f"{rel}: cannot be read ({exc}); nothing was written") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApplicationError(
            f"{rel}: not valid JSON (line {exc.lineno}: {exc.msg}); fix it or move it away, "
            "nothing was written"
        ) from None
    if not isinstance(data, dict):
        raise ApplicationError(f"{rel}: must hold a JSON object; nothing was written")
    return data


def _mapping(data: dict[str, Any], key: str, rel: str, kind: type = dict) -> Any:
    value = data.setdefault(key, kind())
    if not isinstance(value, kind):
        label = "an object" if kind is dict else "a list"
        raise ApplicationError(f"{rel}: '{key}' must be {label}; nothing was written")
    return value


def merge_mcp(data: dict[str, Any], entry: dict[str, Any]) -> str:
    """Sets our server in ``mcpServers``; every other server and key stays."""
    servers = _mapping(data, "mcpServers", MCP_FILE)
    current = servers.get(SERVER)
    servers[SERVER] = entry
    return "unchanged" if current == entry else "added" if current is None else "updated"


def _is_ours(hook: Any, marker: str) -> bool:
    return isinstance(hook, dict) and marker in str(hook.get("command", ""))


def merge_hook(data: dict[str, Any], group: dict[str, Any], marker: str) -> str:
    """Puts our SessionStart group in ``hooks``; other events, groups and hooks stay. A hook
    of ours from an earlier install (same checkout) is replaced, never repeated."""
    hooks = _mapping(data, "hooks", SETTINGS_FILE)
    groups = _mapping(hooks, "SessionStart", SETTINGS_FILE, list)
    if group in groups:
        return "unchanged"
    replaced = False
    for existing in list(groups):
        inner = existing.get("hooks") if isinstance(existing, dict) else None
        if not isinstance(inner, list) or not any(_is_ours(h, marker) for h in inner):
            continue
        replaced = True
        existing["hooks"] = [h for h in inner if not _is_ours(h, marker)]
        if not existing["hooks"]:
            groups.remove(existing)
    groups.append(group)
    return "updated" if replaced else "added"


def plan_command_file(path: Path, text: str, *, force: bool) -> str:
    if not path.exists():
        return "created"
    current = path.read_text(encoding="utf-8", errors="replace")
    if current == text:
        return "unchanged"
    return "updated" if force or MARKER in current else "kept"


def write_atomically(path: Path, text: str) -> None:
    """Claude Code may read these files at any moment: it sees the old one or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _python() -> str:
    """This checkout's virtualenv interpreter (not resolved: the symlink is what selects the
    virtualenv), or the running interpreter when there is no .venv."""
    venv = Path(settings.BASE_DIR) / ".venv" / "bin" / "python"
    return str(venv.absolute() if venv.exists() else Path(sys.executable).absolute())


class Command(BaseCommand):
    help = "Merge the memoryproject MCP server, SessionStart hook and /save into a project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project-dir", required=True, help="the Claude Code project")
        parser.add_argument(
            "--project", help="memoryproject project slug (default: the directory's name)"
        )
        parser.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help=(
                "environment of the hook and the MCP server (repeatable; default none: the "
                "secret key is read from data/secret_key like every command)"
            ),
        )
        parser.add_argument(
            "--force", action="store_true", help="replace a save.md this installer did not write"
        )
        parser.add_argument("--dry-run", action="store_true", help="say what would change")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            root, target = self._target(options)
            writes, changes = self._plan(root, target, force=options["force"])
        except ApplicationError as exc:
            self._fail(exc.message)
        try:
            project_missing = not Project.objects.filter(slug=target.project).exists()
        except DatabaseError as exc:
            self._fail(f"the memory database cannot be read ({exc}); run manage.py migrate")
        if not options["dry_run"]:
            for path, text in writes:
                try:
                    write_atomically(path, text)
                except OSError as exc:
                    self._fail(f"{path.relative_to(root)}: cannot be written ({exc.strerror})")
            if project_missing:
                project_create(slug=target.project)
        if project_missing:
            changes.append(Change("(memory database)", f"project {target.project}", "created"))
        self._report(root, target, changes, dry_run=options["dry_run"], as_json=options["json"])

    def _target(self, options: dict[str, Any]) -> tuple[Path, Target]:
        root = Path(options["project_dir"]).expanduser().absolute()
        if not root.is_dir():
            raise ApplicationError(f"--project-dir: not a directory: {root}")
        slug = options["project"] or slugify(root.name)
        try:
            slug = validate_project_slug(slug)
        except ApplicationError as exc:
            raise ApplicationError(f"--project: {exc.message.removeprefix('project: ')}") from None
        env: dict[str, str] = {}
        for item in options["env"]:
            name, sep, value = item.partition("=")
            if not sep or not ENV_NAME.match(name):
                raise ApplicationError(f"--env: expected NAME=VALUE, got '{item}'")
            env[name] = value
        manage = Path(settings.BASE_DIR) / "manage.py"
        target = Target(_python(), str(manage), slug, env)
        return root, target

    def _plan(
        self, root: Path, target: Target, *, force: bool
    ) -> tuple[list[tuple[Path, str]], list[Change]]:
        """Every change, computed and checked before anything is written."""
        writes: list[tuple[Path, str]] = []
        changes: list[Change] = []
        raw, shell = target.values(shell=False), target.values(shell=True)
        mcp_entry = _template("mcp.json", raw)["mcpServers"][SERVER]
        hook_group = _template("settings.json", shell)["hooks"]["SessionStart"][0]
        for rel, key, merge in (
            (MCP_FILE, f"mcpServers.{SERVER}", lambda d: merge_mcp(d, mcp_entry)),
            (
                SETTINGS_FILE,
                "hooks.SessionStart (load_session --format text)",
                lambda d: merge_hook(d, hook_group, target.hook_marker),
            ),
        ):
            path = root / rel
            existing = _read_object(path, rel)
            data = {} if existing is None else existing
            action = merge(data)
            if existing is None:
                action = "created"
            changes.append(Change(rel, key, action))
            if action != "unchanged":
                writes.append((path, _json_text(data)))
        text = _template("commands/save.md", raw)
        action = plan_command_file(root / COMMAND_FILE, text, force=force)
        changes.append(Change(COMMAND_FILE, "/save", action))
        if action in ("created", "updated"):
            writes.append((root / COMMAND_FILE, text))
        return writes, changes

    def _report(
        self, root: Path, target: Target, changes: list[Change], *, dry_run: bool, as_json: bool
    ) -> None:
        changed = any(c.changes for c in changes)
        if as_json:
            body = {
                "project_dir": str(root),
                "project": target.project,
                "dry_run": dry_run,
                "changed": changed,
                "changes": [asdict(c) for c in changes],
            }
            self.stdout.write(json.dumps(body))
            return
        self.stdout.write(f"Claude Code project {root} (memory project '{target.project}')")
        for c in changes:
            action = f"would be {c.action}" if dry_run and c.changes else c.action
            self.stdout.write(f"  {action:<18} {c.file:<26} {c.key}")
            if c.action == "kept":
                self.stdout.write("  (not written by this installer: kept; --force replaces it)")
        if not changed:
            self.stdout.write("Nothing to change: already installed.")
        elif dry_run:
            self.stdout.write("Dry run: nothing was written.")
        else:
            self.stdout.write(
                f"Done. Start Claude Code in {root} and approve the '{SERVER}' MCP server "
                "when asked; /save stores a session, the next session loads it."
            )

    def _fail(self, message: str) -> NoReturn:
        self.stderr.write(f"install_claude_code: {message}")
        raise SystemExit(2)
