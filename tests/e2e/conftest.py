"""Real-browser tests: Playwright drives Debian's Chromium (``/usr/bin/chromium``; no browser is
downloaded) against pytest-django's ``live_server``.

Playwright's sync API runs an event loop in the test's thread, so Django would refuse the ORM
there (SynchronousOnlyOperation); these tests are the only place that allows it
(DJANGO_ALLOW_ASYNC_UNSAFE), and only while their module's browser runs: the browser is started
and stopped per module, so no loop outlives the browser tests. Each step of
a scenario runs inside ``step(name)``: a failure names the step and leaves a screenshot of the
page as it was (``tests/e2e/screenshots/FAILED-<step>.png``). Screenshots of the main pages go
to the same folder (git-ignored); the README's come from ``docs/screenshots/``.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
README_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "officer-pw-for-tests-only"
TIMEOUT_MS = 15_000


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if CHROMIUM.exists():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is missing: apt-get install -y chromium")
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(scope="module", autouse=True)
def _orm_beside_playwright() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(scope="module")
def browser(_orm_beside_playwright: None) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    context = browser.new_context(
        base_url=live_server.url,
        viewport={"width": 1360, "height": 900},
        accept_downloads=True,
        timezone_id="Europe/Paris",
    )
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    yield tab
    context.close()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def screenshot(page: Any, name: str, *, readme: bool = False) -> Path:
    """A full-page screenshot of ``page`` as ``<name>.png``. The README's pictures
    (``readme``) are written again under docs/screenshots/ only when MEMORY_README_SCREENSHOTS=1,
    so that an ordinary run leaves the committed files alone."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if readme and os.environ.get("MEMORY_README_SCREENSHOTS") == "1":
        README_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(README_SCREENSHOTS / f"{name}.png"), full_page=True)
    return path


@pytest.fixture
def step(page: Any) -> Callable[[str], Any]:
    """``with step("filter the log by decision"): ...`` — a failure inside names the step (and
    the page's URL) and keeps a screenshot of the page as it was."""

    @contextmanager
    def run(name: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            try:
                shot = screenshot(page, f"FAILED-{slug(name)}")
                where = f" at {page.url} (screenshot: {shot.name})"
            except Exception:  # the page itself may be gone
                where = ""
            raise AssertionError(f"step '{name}' failed{where}: {exc}") from exc

    return run


@pytest.fixture
def officer(transactional_db: None) -> Any:
    """A user in the "Compliance officer" group (made by the roles migration)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    group = Group.objects.filter(name="Compliance officer").first()
    assert group is not None, "the 'Compliance officer' group is missing after migrate"
    user = get_user_model().objects.create_user(
        "officer", email="officer@example.com", password=PASSWORD, is_staff=True
    )
    user.groups.add(group)
    return user


def log_in(page: Any, username: str = "officer", password: str = PASSWORD) -> None:
    """Logs in through the admin's own login form."""
    page.goto("/admin/login/?next=/admin/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")


@dataclass
class Api:
    """The REST API of the live server, called over real HTTP with a real key."""

    base: str
    key: str

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path} answered {exc.code}: {exc.read()!r}") from None

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("POST", path, body)

    def get(self, path: str) -> Any:
        return self.call("GET", path)


@pytest.fixture
def api(live_server: Any, transactional_db: None) -> Api:
    """A write key for the project "default" and a client for it."""
    from memoryproject.services import api_key_create

    _, key = api_key_create(
        name="e2e agent", project_slugs=["default"], scope="write", create_projects=True
    )
    return Api(base=live_server.url, key=key)
