"""An API key's projects are read with the key, in one statement, when a call authenticates:
a project bound to the key or taken from it since the last call takes effect on the next call,
never later, through REST and through the identity MCP calls resolve with."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memoryproject.api_keys import api_key_verify
from memoryproject.models import Project, ProjectAPIKey
from memoryproject.projects import project_resolve, projects_visible_to
from memoryproject.services import api_key_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def projects() -> tuple[Project, Project]:
    return (
        Project.objects.create(slug="alpha", name="Alpha"),
        Project.objects.create(slug="beta", name="Beta"),
    )


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def _slugs(client: APIClient) -> list[str]:
    response = client.get("/v1/projects")
    assert response.status_code == 200, response.content
    return sorted(row["slug"] for row in response.json()["projects"])


def test_a_binding_changed_between_two_calls_holds_on_the_next_call(projects):
    alpha, beta = projects
    row, key = api_key_create(name="bindings", project_slugs=["alpha"], scope="read")
    client = _client(key)
    assert _slugs(client) == ["alpha"]
    assert client.get("/v1/traces", {"project": "beta"}).status_code == 404

    row.projects.add(beta)
    assert _slugs(client) == ["alpha", "beta"]
    assert client.get("/v1/traces", {"project": "beta"}).status_code == 200

    row.projects.remove(alpha)
    assert _slugs(client) == ["beta"]
    assert client.get("/v1/traces", {"project": "alpha"}).status_code == 404
    # Its only project now: a call naming none acts on it.
    assert client.get("/v1/traces").status_code == 200


def test_a_key_left_with_no_project_resolves_none(projects):
    row, key = api_key_create(name="bindings", project_slugs=["alpha"], scope="read")
    row.projects.clear()
    identity = api_key_verify(key)
    assert projects_visible_to(identity) == []
    with pytest.raises(Exception, match="has no project"):
        project_resolve(slug=None, api_key=identity)
    assert _client(key).get("/v1/traces", {"project": "alpha"}).status_code == 404


def test_the_projects_read_with_a_key_are_those_of_its_verification(projects):
    """The identity an MCP call resolves with is verified for that call: one verified after a
    change sees it, one verified before keeps what it was verified with (for that one call)."""
    _, beta = projects
    row, key = api_key_create(name="bindings", project_slugs=["alpha", "beta"], scope="read")
    before = api_key_verify(key)
    row.projects.remove(beta)
    after = api_key_verify(key)
    assert [p.slug for p in projects_visible_to(before)] == ["alpha", "beta"]
    assert [p.slug for p in projects_visible_to(after)] == ["alpha"]
    # A key read some other way than by verification reads its projects itself.
    stored = ProjectAPIKey.objects.get(pk=row.pk)
    assert [p.slug for p in projects_visible_to(stored)] == ["alpha"]


def test_a_key_made_once_for_its_rows_yet_any_change_holds_on_the_next_call(projects):
    """A key and its projects are made once per process for the rows as stored: unchanged,
    the next call gets the same objects; a revocation, a new scope or expiry, or a renamed
    project is read on the next call, never answered from memory."""
    from datetime import timedelta

    from memoryproject.api_keys import KeyRefused
    from memoryproject.timeutil import utcnow

    row, key = api_key_create(name="kept", project_slugs=["alpha"], scope="write")
    first = api_key_verify(key)
    assert api_key_verify(key) is first
    assert first.scope == "write"

    ProjectAPIKey.objects.filter(pk=row.pk).update(scope="read")
    assert api_key_verify(key).scope == "read"

    Project.objects.filter(slug="alpha").update(name="Alpha renamed")
    (bound,) = api_key_verify(key).bound_projects  # type: ignore[attr-defined]
    assert bound.name == "Alpha renamed"

    ProjectAPIKey.objects.filter(pk=row.pk).update(expiry_date=utcnow() - timedelta(seconds=1))
    with pytest.raises(KeyRefused, match="expired"):
        api_key_verify(key)
    ProjectAPIKey.objects.filter(pk=row.pk).update(expiry_date=None, revoked=True)
    with pytest.raises(KeyRefused, match="revoked"):
        api_key_verify(key)
    with pytest.raises(KeyRefused, match="Unknown"):
        api_key_verify(key[:-1] + ("x" if key[-1] != "x" else "y"))
