"""Every /v1 endpoint needs a valid, unrevoked API key; keys see only their projects."""

import pytest
from rest_framework.test import APIClient

from memoryproject.errors import NotFoundError, PermissionDeniedError
from memoryproject.models import ProjectAPIKey
from memoryproject.projects import project_resolve

pytestmark = pytest.mark.django_db


def test_request_without_key_is_401_json():
    response = APIClient().get("/v1/projects")
    assert response.status_code == 401
    assert response.json()["message"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_unknown_key_is_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer abcdefgh.notarealkey")
    assert client.get("/v1/projects").status_code == 401


def test_revoked_key_is_refused(make_key):
    api_key, key = make_key(scope="read")
    api_key.revoked = True
    api_key.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.get("/v1/projects")
    assert response.status_code in (401, 403)
    assert "revoked" in response.json()["message"]


def test_valid_key_lists_its_projects(make_key):
    _, key = make_key(scope="read", projects=["alpha", "beta"])
    make_key(scope="read", projects=["gamma"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.get("/v1/projects")
    assert response.status_code == 200
    body = response.json()
    assert [p["slug"] for p in body["projects"]] == ["alpha", "beta"]
    assert body["scope"] == "read"


def test_api_key_prefix_is_visible_and_key_is_stored_hashed(make_key):
    api_key, key = make_key()
    stored = ProjectAPIKey.objects.get(pk=api_key.pk)
    assert key.startswith(stored.prefix + ".")
    assert key not in stored.hashed_key and stored.hashed_key.startswith("sha512$$")


def test_healthz_and_schema_need_no_key():
    client = APIClient()
    assert client.get("/healthz").status_code == 200
    assert client.get("/v1/schema/").status_code == 200


class TestProjectConvention:
    def test_absent_project_uses_the_keys_single_project(self, make_key):
        api_key, _ = make_key(projects=["alpha"])
        assert project_resolve(slug=None, api_key=api_key, access="read").slug == "alpha"

    def test_absent_project_with_several_falls_back_to_default(self, make_key):
        api_key, _ = make_key(projects=["alpha", "default"])
        assert project_resolve(slug=None, api_key=api_key, access="write").slug == "default"

    def test_foreign_project_is_404_for_reads_and_403_for_writes(self, make_key):
        make_key(projects=["secret"])
        api_key, _ = make_key(projects=["alpha"])
        with pytest.raises(NotFoundError):
            project_resolve(slug="secret", api_key=api_key, access="read")
        with pytest.raises(PermissionDeniedError):
            project_resolve(slug="secret", api_key=api_key, access="write")

    def test_read_scope_may_not_write(self, make_key):
        api_key, _ = make_key(scope="read", projects=["alpha"])
        with pytest.raises(PermissionDeniedError):
            project_resolve(slug="alpha", api_key=api_key, access="write")
