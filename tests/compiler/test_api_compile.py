"""POST /v1/graph/compile: a read-only POST with the same answer as the service."""

from __future__ import annotations

import pytest

from graph_app.compiler import context_compile
from graph_app.fact_writes import fact_upsert
from memoryproject.models import Project

pytestmark = pytest.mark.django_db
URL = "/v1/graph/compile"


@pytest.fixture
def facts(default_project):
    fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        valid_from="2026-04-20T00:00:00Z",
    )


def test_read_key_compiles_and_matches_the_service(client_for, default_project, facts):
    client = client_for("read", ("default",))
    response = client.post(
        URL, {"query": "auth_service token format", "max_tokens": 300}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["markdown"].startswith("# Memory context")
    assert body["token_count"] <= 300 and body["max_tokens"] == 300
    assert body["items"][0]["citation"].startswith("[FACT:fact_")
    service = context_compile(
        project=default_project, query="auth_service token format", max_tokens=300
    )
    # The REST answer also names its receipt in the injection log.
    assert isinstance(body.pop("injection_id"), int)
    assert body == service


def test_project_may_come_from_body_or_query(client_for, facts):
    Project.objects.create(slug="other", name="other")
    client = client_for("read", ("default", "other"))
    in_body = client.post(URL, {"project": "other", "query": "auth_service"}, format="json")
    in_query = client.post(f"{URL}?project=other", {"query": "auth_service"}, format="json")
    assert in_body.status_code == in_query.status_code == 200
    assert in_body.json()["project"] == in_query.json()["project"] == "other"
    assert in_body.json()["items"] == []


def test_foreign_project_is_not_found(client_for, facts):
    Project.objects.create(slug="secret", name="secret")
    client = client_for("read", ("default",))
    response = client.post(URL, {"project": "secret", "query": "auth_service"}, format="json")
    assert response.status_code == 404


def test_without_key_is_refused(client):
    response = client.post(URL, {"query": "x"}, content_type="application/json")
    assert response.status_code in (401, 403)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "max_tokens": 10}, "max_tokens"),
        ({"query": "x", "max_tokens": 50_000}, "max_tokens"),
        ({"query": ""}, "query"),
        ({}, "query"),
        ({"query": "x", "as_of": "not a date"}, "as_of"),
        ({"query": "x", "known_at": "2026-01-01T00:00:00"}, "known_at"),
    ],
)
def test_bad_input_is_400_naming_the_field(api, body, field):
    response = api.post(URL, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert response.json()["message"].startswith(f"{field}:")
