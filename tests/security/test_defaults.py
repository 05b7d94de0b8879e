"""Safe defaults: DEBUG off unless asked, a secret key of the installation's own made on first
run, the deployment checks clean, static files and JSON errors served with DEBUG off, no
filesystem path on the landing page, and a cache shared through Redis when REDIS_URL is set."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parents[2]
PORTS = range(18200, 18300)
#: What the environment of a fresh checkout holds: none of the variables that configure it.
UNSET = {"SECRET_KEY", "DEBUG", "PLAIN_HTTP", "REDIS_URL", "SECRET_KEY_FILE", "DATABASE_URL"}


def _env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["DJANGO_SETTINGS_MODULE"] = "memoryproject.settings"
    env["SECRET_KEY_FILE"] = str(tmp_path / "secret_key")
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'unused.sqlite3'}"
    env.update(overrides)
    return env


def manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def setting(tmp_path: Path, expression: str, **env: str) -> str:
    code = f"from django.conf import settings; print({expression})"
    result = manage(tmp_path, "shell", "-c", code, **env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_debug_is_off_unless_asked_for(tmp_path):
    assert setting(tmp_path, "settings.DEBUG") == "False"
    assert setting(tmp_path, "settings.DEBUG", DEBUG="1") == "True"


def test_a_secret_key_is_made_on_first_run_into_a_private_file_and_kept(tmp_path):
    key_file = tmp_path / "secret_key"
    first = setting(tmp_path, "settings.SECRET_KEY")
    assert key_file.read_text().strip() == first
    assert len(first) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert setting(tmp_path, "settings.SECRET_KEY") == first
    assert setting(tmp_path, "settings.SECRET_KEY", SECRET_KEY="x" * 60) == "x" * 60


def test_the_default_secret_key_file_is_not_tracked_by_git():
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "data/secret_key"], cwd=ROOT, capture_output=True
    )
    assert ignored.returncode == 0


def test_an_unwritable_key_file_is_refused_with_a_clear_message(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = manage(tmp_path, "check", SECRET_KEY_FILE=str(blocker / "secret_key"))
    assert result.returncode != 0
    assert "SECRET_KEY is not set and SECRET_KEY_FILE" in result.stderr


def test_deploy_checks_are_clean_with_production_settings(tmp_path):
    result = manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues (0 silenced)" in result.stdout


def test_plain_http_for_a_local_server_is_what_the_deploy_checks_flag(tmp_path):
    result = manage(tmp_path, "check", "--deploy", PLAIN_HTTP="1")
    assert "security.W008" in result.stderr  # no HTTPS redirect
    assert "security.W012" in result.stderr  # session cookie not secure-only


def test_production_settings_redirect_to_https_and_send_hsts(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    plain = Client().get("/v1/projects")
    assert plain.status_code == 301
    assert plain["Location"].startswith("https://")
    secure = Client().get("/healthz", secure=True)
    assert "max-age=31536000" in secure["Strict-Transport-Security"]
    assert Client().get("/healthz").status_code != 301  # probes stay on plain HTTP


@pytest.mark.django_db
def test_pages_forbid_framing_and_sniffing(client):
    response = client.get("/")
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.django_db
def test_the_landing_page_shows_no_filesystem_path(client):
    html = client.get("/").content.decode()
    assert str(django_settings.BASE_DIR) not in html
    assert str(Path.home()) not in html
    assert "mcp_serve" in html


def _make_run_recipe() -> str:
    makefile = (ROOT / "Makefile").read_text()
    return makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]


def test_make_run_serves_with_debug_off_and_needs_no_configuration():
    recipe = _make_run_recipe()
    assert "DEBUG=" not in recipe and "SECRET_KEY" not in recipe
    assert "PLAIN_HTTP=$${PLAIN_HTTP:-1}" in recipe


def test_make_run_serves_through_the_production_server():
    """docs/getting-started.md and docs/operations.md: `make run` is the production command."""
    recipe = _make_run_recipe()
    assert "runserver" not in recipe
    assert "$(PY) -m memoryproject.server --bind $(HOST):$(PORT)" in recipe
    production = (ROOT / "docs" / "operations.md").read_text()
    assert "python -m memoryproject.server" in production


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    return (
        f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


@pytest.mark.django_db(transaction=True)
def test_create_api_key_works_as_the_readme_shows(tmp_path, default_project):
    result = manage(
        tmp_path,
        "create_api_key",
        *("--name", "my-agent", "--project", "default", "--scope", "write"),
        DATABASE_URL=_database_url(),
    )
    assert result.returncode == 0, result.stderr
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {result.stdout.strip()}")
    assert client.get("/v1/projects").json()["scope"] == "write"


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port in 18200-18299")


def _get(url: str) -> tuple[int, Message, bytes]:
    """The status, headers (names read case-insensitively, as HTTP does: the server sends
    them in lower case) and body of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.fixture
def production_server(tmp_path, transactional_db, default_project) -> Iterator[str]:
    """The server as `make run` starts it: ``python -m memoryproject.server`` with the deployed
    settings (the application preloaded), no DEBUG, no SECRET_KEY, plain HTTP on loopback."""
    port = _free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "memoryproject.server"),
            *("--bind", f"127.0.0.1:{port}", "--workers", "1"),
        ],
        cwd=ROOT,
        env=_env(tmp_path, PLAIN_HTTP="1", DATABASE_URL=_database_url()),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                _get(base + "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_production_server_serves_static_files_json_errors_and_no_debug_page(
    production_server,
):
    status, headers, body = _get(production_server + "/")
    assert status == 200 and str(ROOT) not in body.decode()
    status, headers, _ = _get(production_server + "/static/admin/css/base.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css")
    status, headers, body = _get(production_server + "/v1/nope")
    assert status == 404 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["code"] == "not_found"
    status, _, body = _get(production_server + "/no-such-page")
    assert status == 404
    assert b"URLconf" not in body and b"DEBUG = True" not in body


def test_the_cache_is_local_memory_without_redis_url(tmp_path):
    assert setting(tmp_path, "settings.CACHES['default']['BACKEND']").endswith("LocMemCache")


def _redis_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1):
            return True
    except OSError:
        return False


def test_the_cache_is_redis_when_redis_url_is_set(tmp_path):
    if not _redis_reachable():
        pytest.skip("Redis is not reachable on 127.0.0.1:6379 (.ci/run starts it)")
    import redis

    marker = f"harden-{os.getpid()}-{time.time_ns()}"
    code = (
        "from django.core.cache import caches; "
        f"caches['default'].set('{marker}', 'shared', 60); print(type(caches['default']).__name__)"
    )
    result = manage(tmp_path, "shell", "-c", code, REDIS_URL="redis://127.0.0.1:6379/0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "RedisCache"
    stored = [k for k in redis.Redis().scan_iter(f"*{marker}")]
    assert len(stored) == 1 and stored[0].decode().startswith("memoryproject:")
    redis.Redis().delete(*stored)
