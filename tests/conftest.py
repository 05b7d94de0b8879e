"""Shared fixtures: projects, API keys and authenticated REST clients."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memoryproject.models import Project, ProjectAPIKey
from memoryproject.services import api_key_create


@pytest.fixture
def make_key(db) -> Callable[..., tuple[ProjectAPIKey, str]]:
    def _make(
        scope: str = "write", projects: Sequence[str] = ("default",), name: str = "test key"
    ) -> tuple[ProjectAPIKey, str]:
        return api_key_create(
            name=name, project_slugs=list(projects), scope=scope, create_projects=True
        )

    return _make


@pytest.fixture
def client_for(make_key) -> Callable[..., APIClient]:
    """An APIClient sending ``Authorization: Bearer <key>`` for a new key."""

    def _client(scope: str = "write", projects: Sequence[str] = ("default",)) -> APIClient:
        _, key = make_key(scope=scope, projects=projects)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return _client


@pytest.fixture
def api(client_for) -> APIClient:
    """A write-scoped client for the default project."""
    return client_for("write", ("default",))


@pytest.fixture
def default_project(db) -> Project:
    # get_or_create: a transactional test's flush removes the row the migration made.
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default project"})
    return project


def on_postgres() -> bool:
    return connection.vendor == "postgresql"
