"""Settings, bootstrap, health, landing page and the create_api_key command."""

import os
import socket
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from memoryproject.dbconfig import (
    SQLITE_ENGINE,
    database_config,
    database_url_of,
    database_url_parse,
)
from memoryproject.models import ProjectAPIKey

ROOT = Path(__file__).resolve().parents[2]


def test_database_url_absent_means_sqlite_file_in_data_dir(tmp_path):
    config = database_config(None, base_dir=tmp_path)
    assert config["ENGINE"] == SQLITE_ENGINE
    assert config["NAME"] == str(tmp_path / "data" / "memoryproject.sqlite3")
    assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]
    assert "busy_timeout" in config["OPTIONS"]["init_command"]


@pytest.mark.parametrize(
    "config",
    [
        {"ENGINE": "django.db.backends.sqlite3", "NAME": "data/x.sqlite3"},
        {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "memory",
            "USER": "svc user",
            "PASSWORD": "p@ss:w/rd#1",
            "HOST": "db.internal",
            "PORT": 5433,
        },
    ],
)
def test_a_new_process_is_given_the_database_it_was_started_from(config):
    """The URL a server gives a process it starts (the snapshot writer) names the same database,
    credentials with URL metacharacters included."""
    parsed = database_url_parse(database_url_of(config))
    if config["ENGINE"].endswith("sqlite3"):
        assert parsed["NAME"] == str(Path(config["NAME"]).resolve())
        return
    for key in ("NAME", "USER", "PASSWORD", "HOST"):
        assert parsed[key] == config[key]
    assert int(parsed["PORT"]) == config["PORT"]


@pytest.mark.django_db
def test_a_sqlite_commit_is_synced_to_disk_before_it_is_acknowledged():
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's own setting")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        assert cursor.fetchone()[0] == 2  # FULL: NORMAL (1) in WAL mode may lose a commit
        cursor.execute("PRAGMA journal_mode")
        journal = cursor.fetchone()[0]
    assert journal in ("wal", "memory")  # (the test database may live in memory)


def test_database_url_postgres_is_parsed(tmp_path):
    config = database_config("postgres://mem:pw@db.example:5433/memory", base_dir=tmp_path)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["HOST"], config["PORT"], config["NAME"], config["USER"]) == (
        "db.example",
        5433,
        "memory",
        "mem",
    )
    assert "transaction_mode" not in config.get("OPTIONS", {})


def test_database_url_options_kept_connections_and_unknown_schemes(tmp_path):
    url = "postgresql://mem@db.example/memory?sslmode=require&connect_timeout=5"
    config = database_config(url, base_dir=tmp_path, conn_max_age=60)
    assert config["OPTIONS"] == {"sslmode": "require", "connect_timeout": 5}
    assert (config["CONN_MAX_AGE"], config["CONN_HEALTH_CHECKS"]) == (60, True)
    closed = database_config(None, base_dir=tmp_path)
    assert (closed["CONN_MAX_AGE"], closed["CONN_HEALTH_CHECKS"]) == (0, False)
    with pytest.raises(ValueError, match="unknown"):
        database_config("nosuchdb://x/y", base_dir=tmp_path)


def _manage(*args: str, **env_overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    env["DJANGO_SETTINGS_MODULE"] = "memoryproject.settings"
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_production_mode_without_secret_key_starts_with_the_installation_key(tmp_path):
    key_file = tmp_path / "secret_key"
    result = _manage("check", SECRET_KEY_FILE=str(key_file))
    assert result.returncode == 0, result.stderr
    assert len(key_file.read_text().strip()) >= 50


def test_debug_mode_starts_without_secret_key(tmp_path):
    result = _manage("check", DEBUG="1", SECRET_KEY_FILE=str(tmp_path / "secret_key"))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("value", ["off", "OFF", ""])
def test_compiler_snapshots_are_switched_off_by_off_or_empty(tmp_path, value):
    # As WITNESS_DIR: "off" is the switch, not a directory named off.
    result = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(repr(settings.COMPILER_SNAPSHOT_DIR))",
        DEBUG="1",
        DATABASE_URL=f"sqlite:///{tmp_path / 'off.sqlite3'}",
        COMPILER_SNAPSHOT_DIR=value,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "''"


@pytest.mark.django_db
def test_bootstrap_creates_admin_once_and_never_resets_password():
    out = StringIO()
    call_command("bootstrap", stdout=out)
    text = out.getvalue()
    password = next(
        line.split(":", 1)[1].strip() for line in text.splitlines() if "password" in line
    )
    key = next(line.split(":", 1)[1].strip() for line in text.splitlines() if "API key" in line)
    user = get_user_model().objects.get(username="admin")
    assert user.is_superuser and user.check_password(password)
    assert len(password) >= 20

    again = StringIO()
    call_command("bootstrap", stdout=again)
    assert "nothing changed" in again.getvalue()
    assert password not in again.getvalue()
    user.refresh_from_db()
    assert user.check_password(password)
    assert get_user_model().objects.filter(is_superuser=True).count() == 1
    assert ProjectAPIKey.objects.count() == 1

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/v1/projects").json()["scope"] == "write"


@pytest.mark.django_db
def test_bootstrap_passwords_are_random():
    first = StringIO()
    call_command("bootstrap", stdout=first)
    get_user_model().objects.all().delete()
    second = StringIO()
    call_command("bootstrap", stdout=second)

    def pw(text: str) -> str:
        return next(line for line in text.splitlines() if "password" in line)

    assert pw(first.getvalue()) != pw(second.getvalue())


@pytest.mark.django_db
def test_printed_credentials_log_in_to_admin(client):
    out = StringIO()
    call_command("bootstrap", stdout=out)
    password = next(
        line.split(":", 1)[1].strip() for line in out.getvalue().splitlines() if "password" in line
    )
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "admin", "password": password}, follow=True
    )
    assert response.status_code == 200
    assert response.context["user"].is_authenticated
    assert b"Site administration" in response.content


@pytest.mark.django_db
def test_create_api_key_command_prints_key_once():
    out, err = StringIO(), StringIO()
    call_command(
        "create_api_key",
        "--name",
        "ci",
        "--project",
        "default",
        "--scope",
        "read",
        stdout=out,
        stderr=err,
    )
    key = out.getvalue().strip()
    api_key = ProjectAPIKey.objects.get(name="ci")
    assert key.startswith(api_key.prefix + ".")
    assert api_key.scope == "read"
    assert [p.slug for p in api_key.projects.all()] == ["default"]


@pytest.mark.django_db
def test_healthz_reports_database_and_migrations():
    body = APIClient().get("/healthz").json()
    assert body["status"] == "ok"
    assert body["database"] in {"sqlite", "postgresql"}
    assert body["pending_migrations"] is False
    assert body["version"]


@pytest.mark.django_db
def test_landing_page_links_admin_docs_and_mcp(client):
    html = client.get("/").content.decode()
    for link in ('href="/admin/"', 'href="/v1/docs/"', 'href="/v1/schema/"', "mcp_serve"):
        assert link in html


@pytest.mark.django_db
def test_api_docs_page_serves_offline_assets(client):
    html = client.get("/v1/docs/").content.decode()
    assert "swagger" in html.lower()
    assert "cdn.jsdelivr" not in html


def test_count_tokens_works_with_network_blocked(monkeypatch):
    from memoryproject import tokens

    tokens._encoding_locked.cache_clear()

    def refuse(*args, **kwargs):
        raise OSError("network access is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("") == 0
    assert tokens.count_tokens("def fact_upsert(subject_id):") > 3


def test_the_encoding_made_from_the_bundled_file_is_tiktokens():
    import tiktoken

    from memoryproject import tokens

    tokens._encoding_locked.cache_clear()
    ours = tokens.encoding()
    reference = tiktoken.get_encoding(tokens.ENCODING_NAME)
    assert ours is not reference
    assert ours.name == reference.name
    assert ours._mergeable_ranks == reference._mergeable_ranks
    assert ours._pat_str == reference._pat_str
    assert ours._special_tokens == reference._special_tokens
    text = "Décision: fact_upsert(subject_id) 12345 🙂 <|endoftext|>\n\n  done"
    assert ours.encode_ordinary(text) == reference.encode_ordinary(text)


def test_a_bundled_file_other_than_the_published_one_is_left_to_tiktoken(monkeypatch):
    from memoryproject import tokens

    monkeypatch.setattr(tokens, "CL100K_SHA256", "0" * 64)
    tokens._encoding_locked.cache_clear()
    try:
        assert tokens.bundled_ranks() is None
        assert tokens.count_tokens("hello world") == 2
    finally:
        tokens._encoding_locked.cache_clear()


@pytest.mark.django_db
def test_openapi_schema_is_valid_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    text = target.read_text()
    assert "ApiKeyBearer" in text and "scheme: bearer" in text


def test_tokens_warm_loads_the_encoding_that_counting_nothing_does_not():
    # A server's main process warms the tokenizer before forking; counting "" would load nothing.
    from memoryproject import tokens

    tokens._encoding_locked.cache_clear()
    assert tokens.count_tokens("") == 0
    assert tokens._encoding_locked.cache_info().currsize == 0
    tokens.tokens_warm()
    assert tokens._encoding_locked.cache_info().currsize == 1


@pytest.mark.django_db
@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_an_api_call_asking_for_json_or_anything_gets_json(api, accept):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    response = api.get("/v1/projects", **headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert [p["slug"] for p in response.json()["projects"]] == ["default"]


@pytest.mark.django_db
def test_an_api_call_asking_only_for_html_is_refused_not_answered_in_json(api):
    response = api.get("/v1/projects", HTTP_ACCEPT="text/html")
    assert response.status_code == 406
    assert "text/html" not in response["Content-Type"]


@pytest.mark.django_db
def test_the_schema_still_negotiates_its_formats(client):
    as_json = client.get("/v1/schema/", {"format": "json"})
    assert as_json.status_code == 200 and as_json["Content-Type"].startswith(
        "application/vnd.oai.openapi+json"
    )
    assert as_json.json()["openapi"].startswith("3.1")
    as_yaml = client.get("/v1/schema/")
    assert as_yaml.status_code == 200
    assert as_yaml["Content-Type"].startswith("application/vnd.oai.openapi;")
    assert as_yaml.content.decode().startswith("openapi: 3.1")
