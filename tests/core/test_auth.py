"""Every /v1 endpoint needs a valid, unrevoked API key; keys see only their projects; refused
keys are throttled; no caller ever creates a project implicitly."""

import time
from io import StringIO

import pytest
from django.core.cache import caches
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from rest_framework.test import APIClient

from memoryproject import throttling
from memoryproject.errors import NotFoundError, PermissionDeniedError
from memoryproject.models import Project, ProjectAPIKey
from memoryproject.projects import LocalIdentity, project_resolve

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


class TestFailedAuthThrottling:
    def test_thirty_bad_keys_in_a_row_get_429_json_with_retry_after(self, make_key):
        client = APIClient()
        statuses = []
        for i in range(30):
            client.credentials(HTTP_AUTHORIZATION=f"Bearer guess{i:03d}.wrong")
            response = client.get("/v1/projects")
            statuses.append(response.status_code)
        assert statuses[:10] == [401] * 10 and set(statuses[10:]) == {429}
        assert response.json()["code"] == "throttled"
        assert 1 <= int(response["Retry-After"]) <= 300
        # The address is blocked, whatever key it sends next; another address is not.
        _, key = make_key(scope="read")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        assert client.get("/v1/projects").status_code == 429
        assert client.get("/v1/projects", REMOTE_ADDR="10.1.2.3").status_code == 200

    def test_a_key_prefix_guessed_from_many_addresses_is_blocked(self, make_key):
        _, key = make_key(scope="read")
        prefix = key.partition(".")[0]
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {prefix}.wrong-secret")
        for i in range(10):
            assert client.get("/v1/projects", REMOTE_ADDR=f"10.0.0.{i}").status_code == 401
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        assert client.get("/v1/projects", REMOTE_ADDR="10.9.9.9").status_code == 429

    @override_settings(MEMORY_AUTH_FAILURES=3, MEMORY_AUTH_FAILURE_WINDOW=60)
    def test_the_limit_and_window_come_from_settings(self):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Bearer abcdefgh.wrong")
        assert [client.get("/v1/projects").status_code for _ in range(4)] == [401, 401, 401, 429]
        assert 1 <= int(client.get("/v1/projects")["Retry-After"]) <= 60

    def test_requests_without_a_key_are_not_counted(self):
        client = APIClient()
        assert {client.get("/v1/projects").status_code for _ in range(15)} == {401}

    @override_settings(MEMORY_AUTH_FAILURES=3)
    def test_a_new_process_locks_out_after_its_first_refused_keys(self, make_key):
        # A new process has counted no refused key: with its cache in its own memory, it reads
        # no entry until it counts one, and the lockout still starts at the limit.
        throttling._counted_here.clear()
        _, key = make_key(scope="read")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        assert client.get("/v1/projects", REMOTE_ADDR="10.7.0.1").status_code == 200
        client.credentials(HTTP_AUTHORIZATION="Bearer abcdefgh.wrong")
        assert [
            client.get("/v1/projects", REMOTE_ADDR="10.7.0.1").status_code for _ in range(3)
        ] == [401] * 3
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        assert client.get("/v1/projects", REMOTE_ADDR="10.7.0.1").status_code == 429

    def test_a_shared_cache_is_read_though_this_process_counted_nothing(self, make_key, tmp_path):
        # Another process (another worker, another server) counted the refusals in the shared
        # cache: this one, which counted none, still refuses the address.
        shared = {
            "default": {
                "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                "LOCATION": str(tmp_path),
            }
        }
        _, key = make_key(scope="read")
        with override_settings(CACHES=shared, MEMORY_AUTH_FAILURES=3):
            for bucket in throttling._buckets("10.7.0.2", None):
                caches["default"].set(f"{bucket}:start", time.time(), timeout=60)
                caches["default"].set(f"{bucket}:count", 3, timeout=60)
            throttling._counted_here.clear()
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
            assert client.get("/v1/projects", REMOTE_ADDR="10.7.0.2").status_code == 429
            assert client.get("/v1/projects", REMOTE_ADDR="10.7.0.3").status_code == 200


class TestIdentities:
    def test_keyless_local_callers_never_create_a_project(self):
        with pytest.raises(NotFoundError) as refused:
            project_resolve(slug="typo-project", api_key=None, access="write")
        assert "create_project typo-project" in refused.value.message
        assert not Project.objects.filter(slug="typo-project").exists()

    def test_a_local_identity_is_bound_to_its_project_and_scope(self):
        Project.objects.create(slug="alpha")
        Project.objects.create(slug="beta")
        reader = LocalIdentity(project="alpha", scope="read")
        assert project_resolve(slug=None, api_key=reader, access="read").slug == "alpha"
        assert reader.label == "local:alpha/read"
        with pytest.raises(PermissionDeniedError):
            project_resolve(slug=None, api_key=reader, access="write")
        writer = LocalIdentity(project="alpha", scope="write")
        assert project_resolve(slug="alpha", api_key=writer, access="write").slug == "alpha"
        with pytest.raises(PermissionDeniedError):
            project_resolve(slug="beta", api_key=writer, access="write")
        with pytest.raises(NotFoundError):
            project_resolve(slug="beta", api_key=writer, access="read")

    def test_create_project_command_is_idempotent(self):
        out = StringIO()
        call_command("create_project", "new-one", "--name", "New one", stdout=out)
        call_command("create_project", "new-one", stdout=out)
        assert "Created project 'new-one'" in out.getvalue()
        assert "already exists" in out.getvalue()
        assert Project.objects.get(slug="new-one").name == "New one"
        with pytest.raises(CommandError, match="project slug must use"):
            call_command("create_project", "Bad Slug")
