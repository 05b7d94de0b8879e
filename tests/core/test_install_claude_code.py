"""manage.py install_claude_code merges memoryproject into a Claude Code project: the MCP server
in .mcp.json (acting as the local identity on the memory project, which it creates when
missing), the SessionStart hook in .claude/settings.json and the /save command. It keeps
every key it finds, changes nothing on a second run and writes nothing on a dry run."""

import io
import json
import shlex
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from memoryproject.models import Project

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
# The checkout's virtualenv interpreter; the running one where the checkout has no .venv.
PYTHON = VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable).absolute()

pytestmark = pytest.mark.django_db

EXISTING_SETTINGS = {
    "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(./.env)"]},
    "model": "opus",
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier"}]}
        ],
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "cat NOTES.md"}]}
        ],
    },
}
EXISTING_MCP = {
    "mcpServers": {"github": {"type": "http", "url": "https://api.example.com/mcp"}},
    "x-team": {"owner": "platform"},
}


def install(project_dir, *args):
    """(exit status, stdout, stderr) of the installer."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(
            "install_claude_code", "--project-dir", str(project_dir), *args, stdout=out, stderr=err
        )
        status = 0
    except SystemExit as exc:
        status = int(exc.code or 0)
    return status, out.getvalue(), err.getvalue()


def install_json(project_dir, *args):
    status, out, err = install(project_dir, *args, "--json")
    assert status == 0, err
    return json.loads(out)


def read(path):
    return json.loads(path.read_text())


def snapshot(root):
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def our_hooks(settings_data):
    return [
        hook
        for group in settings_data["hooks"]["SessionStart"]
        for hook in group["hooks"]
        if "load_session" in hook["command"]
    ]


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "billing-service"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text(json.dumps(EXISTING_SETTINGS, indent=4))
    (root / ".mcp.json").write_text(json.dumps(EXISTING_MCP))
    return root


def test_a_fresh_project_gets_the_server_the_hook_and_the_save_command(tmp_path):
    body = install_json(tmp_path, "--project", "billing")
    assert body["changed"] is True and body["project"] == "billing"
    assert {(c["file"], c["action"]) for c in body["changes"]} == {
        (".mcp.json", "created"),
        (".claude/settings.json", "created"),
        (".claude/commands/save.md", "created"),
        ("(memory database)", "created"),
    }
    # The server the entry starts acts on a project that exists.
    assert Project.objects.filter(slug="billing").exists()

    server = read(tmp_path / ".mcp.json")["mcpServers"]["memoryproject"]
    assert server == {
        "command": str(PYTHON),
        "args": [str(ROOT / "manage.py"), "mcp_serve", "--project", "billing", "--scope", "write"],
        "env": {},
    }

    settings_data = read(tmp_path / ".claude" / "settings.json")
    [group] = settings_data["hooks"]["SessionStart"]
    assert group["matcher"] == "startup|clear|compact"
    [hook] = group["hooks"]
    assert hook["type"] == "command"
    assert shlex.split(hook["command"]) == [
        str(PYTHON),
        str(ROOT / "manage.py"),
        "load_session",
        "--project",
        "billing",
        "--format",
        "text",
    ]

    command = (tmp_path / ".claude" / "commands" / "save.md").read_text()
    frontmatter = command.split("---\n")[1]
    assert "allowed-tools: mcp__memoryproject__save_session" in frontmatter
    assert "description:" in frontmatter
    for section in ("Active project", "Last decision", "Current output", "Open questions"):
        assert f"## {section}" in command
    assert '`project` set to "billing"' in command and "{{" not in command


def test_existing_settings_and_servers_keep_every_key(project):
    install_json(project)
    settings_data = read(project / ".claude" / "settings.json")
    assert settings_data["permissions"] == EXISTING_SETTINGS["permissions"]
    assert settings_data["model"] == "opus"
    assert settings_data["hooks"]["PostToolUse"] == EXISTING_SETTINGS["hooks"]["PostToolUse"]
    session_start = settings_data["hooks"]["SessionStart"]
    assert session_start[0] == EXISTING_SETTINGS["hooks"]["SessionStart"][0]
    assert len(session_start) == 2 and len(our_hooks(settings_data)) == 1

    mcp = read(project / ".mcp.json")
    assert mcp["x-team"] == {"owner": "platform"}
    assert mcp["mcpServers"]["github"] == EXISTING_MCP["mcpServers"]["github"]
    assert set(mcp["mcpServers"]) == {"github", "memoryproject"}
    # The project slug defaults to the directory's name.
    assert mcp["mcpServers"]["memoryproject"]["args"][-4:] == [
        "--project",
        "billing-service",
        "--scope",
        "write",
    ]


def test_a_second_run_changes_nothing_and_says_so(project):
    install(project)
    before = snapshot(project)
    status, out, _ = install(project)
    assert status == 0
    assert "Nothing to change: already installed." in out
    assert snapshot(project) == before
    body = install_json(project)
    assert body["changed"] is False
    assert {c["action"] for c in body["changes"]} == {"unchanged"}


def test_dry_run_reports_the_changes_and_writes_nothing(project):
    before = snapshot(project)
    status, out, _ = install(project, "--dry-run")
    assert status == 0
    assert "would be added" in out and "would be created" in out
    assert "Dry run: nothing was written." in out
    assert snapshot(project) == before
    body = install_json(project, "--dry-run")
    assert body["dry_run"] is True and body["changed"] is True
    assert snapshot(project) == before


def test_a_new_environment_updates_the_hook_instead_of_adding_a_second(project):
    install(project)
    body = install_json(project, "--env", "SECRET_KEY=s3cret value", "--env", "DEBUG=0")
    actions = {c["file"]: c["action"] for c in body["changes"]}
    assert actions == {
        ".mcp.json": "updated",
        ".claude/settings.json": "updated",
        ".claude/commands/save.md": "unchanged",
    }
    settings_data = read(project / ".claude" / "settings.json")
    [hook] = our_hooks(settings_data)
    assert shlex.split(hook["command"])[:2] == ["SECRET_KEY=s3cret value", "DEBUG=0"]
    assert len(settings_data["hooks"]["SessionStart"]) == 2
    env = read(project / ".mcp.json")["mcpServers"]["memoryproject"]["env"]
    assert env == {"SECRET_KEY": "s3cret value", "DEBUG": "0"}


def test_a_save_command_of_the_users_own_is_kept_unless_forced(project):
    own = project / ".claude" / "commands" / "save.md"
    own.parent.mkdir(parents=True)
    own.write_text("Save my notes to NOTES.md\n")
    status, out, _ = install(project)
    assert status == 0 and "kept" in out and "--force replaces it" in out
    assert own.read_text() == "Save my notes to NOTES.md\n"
    body = install_json(project, "--force")
    assert {c["file"]: c["action"] for c in body["changes"]}[".claude/commands/save.md"] == (
        "updated"
    )
    assert "mcp__memoryproject__save_session" in own.read_text()


def test_a_settings_file_that_is_not_json_stops_the_run_before_any_write(project):
    (project / ".claude" / "settings.json").write_text("{ not json")
    before = snapshot(project)
    status, out, err = install(project)
    assert (status, out) == (2, "")
    assert err.startswith("install_claude_code: .claude/settings.json: not valid JSON (line 1")
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--env", "NOT AN ASSIGNMENT"), "--env: expected NAME=VALUE"),
        (("--project", "Bad Slug"), "--project: project slug must use"),
    ],
)
def test_bad_arguments_exit_2_naming_them(tmp_path, args, message):
    status, _, err = install(tmp_path, *args)
    assert status == 2
    assert err.startswith(f"install_claude_code: {message}")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_project_dir_exits_2(tmp_path):
    status, _, err = install(tmp_path / "nowhere")
    assert status == 2 and "--project-dir: not a directory" in err
