"""The browser pages keep their session, CSRF check, login and messages; a /v1 request goes
past the login and messages middleware (memoryproject.middleware.BrowserOnly) and is judged by
its API key alone. Django's test client skips CSRF checks unless told to enforce them: these
tests enforce them."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client

from memoryproject.services import api_key_create

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-password-for-tests-only"
LOGIN = "/admin/login/"


def _token(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, "the login form carries no CSRF token"
    return found.group(1)


@pytest.fixture
def admin_user() -> User:
    return User.objects.create_superuser("officer", password=PASSWORD)


def test_console_login_without_its_csrf_token_is_refused(admin_user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.get(LOGIN)
    refused = client.post(LOGIN, {"username": "officer", "password": PASSWORD})
    assert refused.status_code == 403
    assert "sessionid" not in refused.cookies


def test_console_login_with_its_csrf_token_signs_in_and_pages_carry_messages(
    admin_user: User,
) -> None:
    client = Client(enforce_csrf_checks=True)
    token = _token(client.get(LOGIN).content.decode())
    signed_in = client.post(
        LOGIN, {"username": "officer", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert signed_in.status_code == 302
    assert signed_in.cookies["sessionid"].value
    page = client.get("/admin/")
    assert page.status_code == 200
    assert page.wsgi_request.user == admin_user  # the session's login, read on a page
    # A change through the admin form leaves a message on the next page (messages middleware).
    form = client.get(f"/admin/auth/user/{admin_user.pk}/change/").content.decode()
    changed = client.post(
        f"/admin/auth/user/{admin_user.pk}/password/",
        {
            "password1": PASSWORD + "-new",
            "password2": PASSWORD + "-new",
            "csrfmiddlewaretoken": _token(form),
        },
        follow=True,
    )
    assert changed.status_code == 200
    assert [str(m) for m in changed.context["messages"]] == ["Password changed successfully."]


def test_a_console_session_does_not_authenticate_v1(admin_user: User) -> None:
    client = Client()
    client.force_login(admin_user)
    refused = client.get("/v1/projects")
    assert refused.status_code == 401
    assert refused.json()["code"] == "not_authenticated"
    _, raw = api_key_create(
        name="reader", project_slugs=["alpha"], scope="read", create_projects=True
    )
    answered = client.get("/v1/projects", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert answered.status_code == 200
    assert [p["slug"] for p in answered.json()["projects"]] == ["alpha"]
    # Nothing of the browser's session travels back on an API answer.
    assert not answered.cookies
    assert "Cookie" not in answered.get("Vary", "")


def test_v1_writes_need_no_csrf_token(admin_user: User) -> None:
    _, raw = api_key_create(
        name="writer", project_slugs=["alpha"], scope="write", create_projects=True
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)  # a browser's session cookie rides along
    answered = client.post(
        "/v1/traces",
        {"project": "alpha", "trace_id": str(uuid.uuid4()), "model": "m"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert answered.status_code == 201, answered.content
