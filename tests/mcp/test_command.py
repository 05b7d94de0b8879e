"""`manage.py mcp_serve` refuses bad options, a missing identity or project and an unmigrated
database, with a clear reason; it never creates a project."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.management import call_command

from memoryproject.models import Project, ProjectAPIKey
from tests.mcp.conftest import REPO, key_label, server_env, write_key

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "mcp_serve", *args],
        cwd=REPO,
        env=env or server_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_refuses_an_unmigrated_database_without_touching_stdout(mcp_db, tmp_path):
    env = {**server_env(), "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.sqlite3'}"}
    result = _run(env=env)
    assert result.returncode != 0
    assert "unapplied migration" in result.stderr and "manage.py migrate" in result.stderr
    assert result.stdout == ""


def test_refuses_an_invalid_project_slug_and_port(mcp_db):
    bad_project = _run("--project", "Not A Slug!", "--scope", "write")
    assert bad_project.returncode != 0 and "--project:" in bad_project.stderr
    bad_port = _run("--transport", "streamable-http", "--port", "70000")
    assert bad_port.returncode != 0 and "--port" in bad_port.stderr
    assert bad_project.stdout == bad_port.stdout == ""


def test_stdio_refuses_to_start_without_an_identity(mcp_db):
    result = _run()
    assert result.returncode != 0 and result.stdout == ""
    assert "no identity" in result.stderr
    assert "--scope" in result.stderr and "MEMORY_API_KEY" in result.stderr


def test_an_unknown_project_is_refused_with_how_to_create_it(mcp):
    result = _run("--project", "fresh-repo", "--scope", "write")
    assert result.returncode != 0 and result.stdout == ""
    assert "--project: no project 'fresh-repo'" in result.stderr
    assert "manage.py create_project fresh-repo" in result.stderr
    assert not Project.objects.filter(slug="fresh-repo").exists()

    call_command("create_project", "fresh-repo")

    async def scenario(session):
        return (await session.read_resource("memory://graph/summary")).contents[0].text

    summary = mcp(scenario, "--project", "fresh-repo")
    assert '"project": "fresh-repo"' in summary


def test_bad_revoked_and_misused_api_keys_are_refused_at_start(mcp_db):
    wrong = _run("--api-key", "abcdefgh.not-a-real-key")
    assert wrong.returncode != 0 and "--api-key: Unknown API key." in wrong.stderr
    key = write_key()
    both = _run("--api-key", key, "--scope", "write")
    assert both.returncode != 0 and "--scope: not used with --api-key" in both.stderr
    foreign = _run("--api-key", key, "--project", "elsewhere")
    assert foreign.returncode != 0 and "no project 'elsewhere' for this API key" in foreign.stderr
    ProjectAPIKey.objects.filter(prefix=key.partition(".")[0]).update(revoked=True)
    revoked = _run(env={**server_env(), "MEMORY_API_KEY": key})
    assert revoked.returncode != 0 and "MEMORY_API_KEY: This API key has been revoked" in (
        revoked.stderr
    )
    assert wrong.stdout == both.stdout == revoked.stdout == ""


def test_the_api_key_in_the_environment_is_the_identity_receipts_record(mcp):
    from audit_app.models import InjectionRecord

    key = write_key()
    mcp.env = {**mcp.env, "MEMORY_API_KEY": key}

    async def scenario(session):
        return await session.call_tool("memory_compile_context", {"query": "anything"})

    result = mcp(scenario, client_name="api_key:mFDyNsMo (bootstrap write key)")
    assert not result.is_error
    record = InjectionRecord.objects.get()
    # What the client claims is kept, labelled as self-reported, beside who it really is.
    assert record.client == key_label(key)
    assert record.client_reported == "api_key:mFDyNsMo (bootstrap write key)"


def test_http_refuses_identity_flags_and_remote_binds_without_allow_remote(mcp_db):
    http = ("--transport", "streamable-http", "--port", "18190")
    with_project = _run(*http, "--project", "default")
    assert with_project.returncode != 0
    assert "--project: not used over streamable-http" in with_project.stderr
    remote = _run(*http, "--host", "0.0.0.0")
    assert remote.returncode != 0
    assert "--host: 0.0.0.0 is not a loopback address" in remote.stderr
    assert "--allow-remote" in remote.stderr and "TLS" in remote.stderr
