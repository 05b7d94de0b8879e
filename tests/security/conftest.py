"""Fixtures of the security tests that walk every operation the server publishes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from graph_app.fact_writes import fact_upsert
from sessions_app.trace_writes import trace_record


@pytest.fixture
def admin_api(make_key) -> APIClient:
    _, key = make_key(scope="admin", projects=("default",))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def schema(admin_api) -> dict[str, Any]:
    response = admin_api.get("/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.content)


@pytest.fixture
def ids(default_project) -> dict[str, str]:
    """Real ids for the paths' parameters, in the key's project."""
    fact = fact_upsert(
        project=default_project, subject_id="auth_service", predicate="owns", object_value="x"
    )
    trace = trace_record(project=default_project, model="claude", policy="agent")
    return {
        "fact_id": fact["fact"]["id"],
        "trace_id": str(trace["trace_id"]),
        "episode_id": "ADR-404",
        "entity_id": "auth_service",
        "record_id": "1",
    }
