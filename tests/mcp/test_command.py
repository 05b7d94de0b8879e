"""`manage.py mcp_serve` refuses bad options and an unmigrated database, with a clear reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.mcp.conftest import REPO, server_env

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
    bad_project = _run("--project", "Not A Slug!")
    assert bad_project.returncode != 0 and "--project:" in bad_project.stderr
    bad_port = _run("--transport", "streamable-http", "--port", "70000")
    assert bad_port.returncode != 0 and "--port" in bad_port.stderr
    assert bad_project.stdout == bad_port.stdout == ""


def test_a_new_default_project_is_created_at_start(mcp):
    from memoryproject.models import Project

    async def scenario(session):
        return (await session.read_resource("memory://graph/summary")).contents[0].text

    summary = mcp(scenario, "--project", "fresh-repo")
    assert '"project": "fresh-repo"' in summary
    assert Project.objects.filter(slug="fresh-repo").exists()
