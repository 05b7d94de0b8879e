"""The REST API server starts without the admin's modules and discovers them when the admin is
first needed: a browser page (the admin's or the console's) or a look-up of an admin URL.
Every other process discovers them as it starts. Each check runs in a new interpreter, as the
server starts (its own ``start_up``), or through the real server over HTTP."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mcp.conftest import REPO, free_port, server_env
from tests.new_process import new_process_env

#: The apps' admin modules, which discovery imports.
ADMIN_MODULES = ("memoryproject.admin", "sessions_app.admin", "graph_app.admin", "audit_app.admin")

# As the REST API server starts (memoryproject/server.py): its start-up with the application
# preloaded, then what the script adds before it prints what discovery has imported.
SERVER_START = f"""
import sys
from memoryproject import server
server.start_up(server.server_settings({{}}, []))
from django.test import Client
from django.contrib import admin
def discovered():
    return [name for name in {ADMIN_MODULES!r} if name in sys.modules]
"""


def _run(script: str, tmp_path: Path) -> list[str]:
    """The lines ``script`` prints, run in a new interpreter on a migrated database."""
    env = new_process_env(tmp_path, "discovery.sqlite3", ALLOWED_HOSTS="testserver")
    for args in ((sys.executable, "manage.py", "migrate", "-v0"), (sys.executable, "-c", script)):
        done = subprocess.run(
            args, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split("\n")[:-1]


def test_the_server_starts_without_them_and_a_browser_page_discovers_them(tmp_path):
    lines = _run(
        SERVER_START
        + "print(discovered())\n"
        + "print(Client().get('/v1/projects').status_code, discovered())\n"
        + "page = Client().get('/admin/login/')\n"
        + "print(page.status_code, discovered())\n"
        + "print('memoryproject console' in page.content.decode())\n"
        + "print(len(admin.site._registry) > 10)\n",
        tmp_path,
    )
    # Started, then after an API request (answered without a key): nothing discovered.
    assert lines[:2] == ["[]", "401 []"]
    # The admin's login page discovers every app's admin module, its title set by one of them.
    assert lines[2:] == [f"200 {list(ADMIN_MODULES)}", "True", "True"]


def test_the_consoles_pages_discover_them_too(tmp_path):
    lines = _run(
        SERVER_START + "print(Client().get('/console/dashboard/').status_code, discovered())\n",
        tmp_path,
    )
    assert lines == [f"302 {list(ADMIN_MODULES)}"]


def test_an_admin_url_looked_up_first_has_every_models_pages(tmp_path):
    # Reversing any name reads the whole URL map, kept once read: the admin's part is made
    # after discovery, so every model's pages are in it.
    lines = _run(
        SERVER_START
        + "from django.urls import reverse\n"
        + "print(reverse('schema'), discovered())\n"
        + "print(reverse('admin:audit_app_review_changelist'))\n",
        tmp_path,
    )
    assert lines == [f"/v1/schema/ {list(ADMIN_MODULES)}", "/admin/audit_app/review/"]


def test_any_other_process_discovers_them_as_it_starts(tmp_path):
    lines = _run(
        "import sys, django\n"
        "django.setup()\n"
        f"print([name for name in {ADMIN_MODULES!r} if name in sys.modules])\n",
        tmp_path,
    )
    assert lines == [str(list(ADMIN_MODULES))]


@pytest.mark.django_db(transaction=True)
def test_the_real_servers_first_request_to_the_admin_gets_its_own_page(tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as errlog:
        process = subprocess.Popen(
            [sys.executable, "-m", "memoryproject.server", "--bind", f"127.0.0.1:{port}"],
            cwd=REPO,
            env={**os.environ, **server_env(), "SERVER_WORKERS": "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
    try:
        status, body = _first_get(process, port, "/admin/login/", log)
        assert status == 200
        assert "<title>Log in | memoryproject</title>" in body
    finally:
        process.terminate()
        process.wait(timeout=30)


def _first_get(
    process: subprocess.Popen[bytes], port: int, path: str, log: Path
) -> tuple[int, str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            client.request("GET", path)
            response = client.getresponse()
            return response.status, response.read().decode()
        except ConnectionError:
            time.sleep(0.1)
        finally:
            client.close()
    raise AssertionError(f"the server did not answer:\n{log.read_text()}")
