"""Least privilege in the console: an admin action runs only for people holding the permission
for what it changes, and leaves the admin's history (LogEntry) of what it did; the console
login locks a username out of an address after repeated wrong passwords; the dashboard needs
the permission to view the injection log; API key prefixes show only to people who may view
the keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db.models import Model
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from memoryproject.entitlements import MASK
from memoryproject.models import Project, ProjectAPIKey
from memoryproject.roles import COMPLIANCE_OFFICER
from memoryproject.services import api_key_create
from memoryproject.timeutil import utcnow

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-password-for-tests-only"
DASHBOARD = "/console/dashboard/"
DASHBOARD_CHAIN = "/console/dashboard/chain/"
INJECTIONS = "/admin/audit_app/injectionrecord/"
AUDIT_RUNS = "/admin/audit_app/auditrun/"
KEYS = "/admin/memoryproject/projectapikey/"


def staff_user(username: str, *permissions: str) -> User:
    """Staff holding exactly ``permissions`` ("app_label.codename")."""
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def authenticates(raw_key: str) -> bool:
    response = APIClient().get("/v1/projects", HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert response.status_code in (200, 401), response.status_code
    return response.status_code == 200


# --- admin actions ---------------------------------------------------------------------------


def _key() -> tuple[Model, str]:
    row, raw = api_key_create(
        name="victim key", project_slugs=["victims"], scope="write", create_projects=True
    )
    return row, raw


def _project() -> tuple[Model, str]:
    return Project.objects.create(slug="spare", name="Spare"), ""


def _user() -> tuple[Model, str]:
    return User.objects.create_user("leaver", password=PASSWORD), ""


def _group() -> tuple[Model, str]:
    return Group.objects.create(name="Contractors"), ""


def _gone(row: Model) -> bool:
    return not type(row)._default_manager.filter(pk=row.pk).exists()


def _revoked(row: Model) -> bool:
    return ProjectAPIKey.objects.get(pk=row.pk).revoked


@dataclass(frozen=True)
class ActionCase:
    model: type[Model]
    action: str
    #: The permission the action needs ("app_label.codename").
    permission: str
    #: The history entry it leaves.
    flag: int
    make: Callable[[], tuple[Model, str]]
    done: Callable[[Model], bool]

    @property
    def url(self) -> str:
        return f"/admin/{self.model._meta.app_label}/{self.model._meta.model_name}/"

    @property
    def view_permission(self) -> str:
        return f"{self.model._meta.app_label}.view_{self.model._meta.model_name}"

    def post(self, client: Client, row: Model) -> object:
        data = {"action": self.action, "_selected_action": [str(row.pk)], "index": 0}
        if self.action == "delete_selected":
            data["post"] = "yes"  # the confirmation page's answer
        return client.post(self.url, data, follow=True)


#: Every action the admin offers anyone (checked below against the registry).
ACTIONS = [
    ActionCase(
        ProjectAPIKey,
        "revoke_keys",
        "memoryproject.change_projectapikey",
        CHANGE,
        _key,
        _revoked,
    ),
    ActionCase(
        ProjectAPIKey,
        "delete_selected",
        "memoryproject.delete_projectapikey",
        DELETION,
        _key,
        _gone,
    ),
    ActionCase(
        Project, "delete_selected", "memoryproject.delete_project", DELETION, _project, _gone
    ),
    ActionCase(User, "delete_selected", "auth.delete_user", DELETION, _user, _gone),
    ActionCase(Group, "delete_selected", "auth.delete_group", DELETION, _group, _gone),
]


def _ids(case: ActionCase) -> str:
    return f"{case.model._meta.label}.{case.action}"


def _success_messages(response: object) -> list[str]:
    return [
        str(message)
        for message in response.context["messages"]  # type: ignore[attr-defined]
        if message.level == messages.SUCCESS
    ]


def test_every_admin_action_names_the_permission_it_needs():
    superuser = User.objects.create_superuser("root", "", PASSWORD)
    request = RequestFactory().get("/admin/")
    request.user = superuser
    offered = {}
    for model, model_admin in admin.site._registry.items():
        for name, (func, _, _) in model_admin.get_actions(request).items():
            offered[(model, name)] = func
    assert set(offered) == {(case.model, case.action) for case in ACTIONS}
    for case in ACTIONS:
        wanted = case.permission.split(".")[1].split("_")[0]  # "change", "delete"
        func = offered[(case.model, case.action)]
        assert list(getattr(func, "allowed_permissions", [])) == [wanted], _ids(case)


@pytest.mark.parametrize("case", ACTIONS, ids=_ids)
def test_an_action_is_refused_without_its_permission(case: ActionCase):
    row, raw = case.make()
    viewer = logged_in(staff_user("viewer", case.view_permission))
    listing = viewer.get(case.url)
    assert listing.status_code == 200
    assert f'value="{case.action}"' not in listing.content.decode()  # not offered
    response = case.post(viewer, row)
    assert not _success_messages(response)
    assert not case.done(row)
    assert not LogEntry.objects.exists()
    if raw:
        assert authenticates(raw)  # the key still works


@pytest.mark.parametrize("case", ACTIONS, ids=_ids)
def test_an_action_runs_with_its_permission_and_leaves_a_history_entry(case: ActionCase):
    row, raw = case.make()
    if raw:
        assert authenticates(raw)
    user = staff_user("keeper", case.view_permission, case.permission)
    holder = logged_in(user)
    assert f'value="{case.action}"' in holder.get(case.url).content.decode()
    response = case.post(holder, row)
    assert _success_messages(response)
    assert case.done(row)
    entry = LogEntry.objects.get()
    assert entry.user == user
    assert entry.action_flag == case.flag
    assert entry.content_type == ContentType.objects.get_for_model(case.model)
    assert entry.object_id == str(row.pk)
    assert entry.object_repr == str(row)
    if raw:
        assert not authenticates(raw)


def test_revoking_names_the_key_in_the_history():
    row, _ = _key()
    other, other_raw = api_key_create(name="bystander", project_slugs=["victims"], scope="read")
    user = staff_user(
        "keeper", "memoryproject.view_projectapikey", "memoryproject.change_projectapikey"
    )
    ActionCase(
        ProjectAPIKey, "revoke_keys", "memoryproject.change_projectapikey", CHANGE, _key, _revoked
    ).post(logged_in(user), row)
    entry = LogEntry.objects.get()
    assert entry.get_change_message() == f"Revoked API key 'victim key' (prefix {row.prefix})."
    assert entry.object_repr == "victim key"
    assert not ProjectAPIKey.objects.get(pk=other.pk).revoked and authenticates(other_raw)


# --- login lockout ---------------------------------------------------------------------------

HANDLERS = ["axes.handlers.database.AxesDatabaseHandler", "axes.handlers.cache.AxesCacheHandler"]


@pytest.fixture(params=HANDLERS, ids=["database", "cache"])
def lockout(request: pytest.FixtureRequest, settings) -> Iterator[int]:
    """Counted in the database (no REDIS_URL) or in the shared cache (REDIS_URL): the same
    rules either way. Answers the failure limit."""
    settings.AXES_HANDLER = request.param
    yield settings.AXES_FAILURE_LIMIT


def log_in(client: Client, username: str, password: str, address: str = "10.0.0.1") -> object:
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": password, "next": "/admin/"},
        REMOTE_ADDR=address,
    )


def test_the_limit_and_cooloff_are_five_tries_and_fifteen_minutes_by_default(settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"


def test_wrong_passwords_lock_the_username_out_even_for_the_right_one(lockout: int):
    User.objects.create_user("alice", password=PASSWORD, is_staff=True)
    client = Client()
    for _ in range(lockout - 1):
        assert log_in(client, "alice", "wrong").status_code == 200  # the form, with its error
    locked = log_in(client, "alice", "wrong")
    assert locked.status_code == 429
    refused = log_in(client, "alice", PASSWORD)
    assert refused.status_code == 429
    assert "_auth_user_id" not in client.session
    page = refused.content.decode()
    assert "Too many failed logins" in page and "15 minutes" in page
    assert refused["Retry-After"] == "900"
    assert client.get("/admin/").status_code == 302  # still to the login page


def test_a_lockout_holds_one_username_at_one_address_only(lockout: int):
    User.objects.create_user("alice", password=PASSWORD, is_staff=True)
    User.objects.create_user("bob", password=PASSWORD, is_staff=True)
    for _ in range(lockout):
        log_in(Client(), "alice", "wrong", address="10.0.0.1")
    assert log_in(Client(), "alice", PASSWORD, address="10.0.0.1").status_code == 429
    assert log_in(Client(), "bob", PASSWORD, address="10.0.0.1").status_code == 302
    assert log_in(Client(), "alice", PASSWORD, address="10.0.0.2").status_code == 302


def test_a_lockout_ends_after_the_cooloff(lockout: int):
    User.objects.create_user("alice", password=PASSWORD, is_staff=True)
    with time_machine.travel(utcnow(), tick=False) as clock:
        for _ in range(lockout):
            log_in(Client(), "alice", "wrong")
        assert log_in(Client(), "alice", PASSWORD).status_code == 429
        clock.shift(timedelta(minutes=16))
        assert log_in(Client(), "alice", PASSWORD).status_code == 302


def test_an_administrator_lifts_a_lockout_with_the_command(lockout: int):
    User.objects.create_user("alice", password=PASSWORD, is_staff=True)
    for _ in range(lockout):
        log_in(Client(), "alice", "wrong", address="10.0.0.9")
    assert log_in(Client(), "alice", PASSWORD, address="10.0.0.9").status_code == 429
    call_command("axes_reset_ip_username", "10.0.0.9", "alice", stdout=StringIO())
    assert log_in(Client(), "alice", PASSWORD, address="10.0.0.9").status_code == 302


def test_a_success_before_the_limit_starts_the_count_again(lockout: int):
    User.objects.create_user("alice", password=PASSWORD, is_staff=True)
    for _ in range(lockout - 1):
        log_in(Client(), "alice", "wrong")
    assert log_in(Client(), "alice", PASSWORD).status_code == 302
    for _ in range(lockout - 1):
        log_in(Client(), "alice", "wrong")
    assert log_in(Client(), "alice", PASSWORD).status_code == 302


# --- the dashboard and key prefixes ----------------------------------------------------------


@pytest.fixture
def officer_user() -> User:
    user = User.objects.create_user("officer", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=COMPLIANCE_OFFICER))
    return user


def test_the_dashboard_needs_the_permission_to_view_the_injection_log(officer_user):
    bare = logged_in(staff_user("bare"))
    assert bare.get(DASHBOARD).status_code == 403
    assert bare.get(DASHBOARD_CHAIN).status_code == 403
    assert 'id="link-dashboard"' not in bare.get("/admin/").content.decode()
    officer = logged_in(officer_user)
    assert officer.get(DASHBOARD).status_code == 200
    assert officer.get(DASHBOARD_CHAIN).status_code == 200
    assert 'id="link-dashboard"' in officer.get("/admin/").content.decode()


@pytest.fixture
def key_activity(make_key) -> ProjectAPIKey:
    """A key that asked for a plan and ran a contradiction audit: both rows name it."""
    key, raw = make_key(scope="admin", projects=("default",), name="ci agent")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.post("/v1/plan", {}, format="json").status_code == 200
    assert api.post("/v1/graph/audit/contradictions", {}, format="json").status_code == 200
    return key


def _pages(client: Client) -> dict[str, str]:
    from audit_app.models import AuditRun, InjectionRecord

    record = InjectionRecord.objects.filter(source="plan").get()
    run = AuditRun.objects.get()
    urls = {
        "dashboard": DASHBOARD,
        "log": INJECTIONS,
        "record": f"{INJECTIONS}{record.pk}/change/",
        "audit run": f"{AUDIT_RUNS}{run.pk}/change/",
    }
    pages = {}
    for name, url in urls.items():
        response = client.get(url)
        assert response.status_code == 200, name
        pages[name] = response.content.decode()
    return pages


def test_key_prefixes_are_masked_for_people_who_may_not_view_keys(officer_user, key_activity):
    officer = logged_in(officer_user)
    for name, page in _pages(officer).items():
        assert key_activity.prefix not in page, name
        assert f"api_key:{MASK} (ci agent)" in page, name
    assert officer.get(KEYS).status_code == 403
    # Nor can a filter spell the prefix out.
    probe = officer.get(INJECTIONS, {"client__startswith": f"api_key:{key_activity.prefix[:1]}"})
    assert probe.status_code == 400
    assert officer.get(INJECTIONS, {"client__exact": key_activity.label}).status_code == 400


def test_key_prefixes_show_to_people_who_may_view_keys(officer_user, key_activity):
    officer_user.user_permissions.add(Permission.objects.get(codename="view_projectapikey"))
    officer = logged_in(officer_user)
    for name, page in _pages(officer).items():
        assert key_activity.label in page.replace("&#x27;", "'"), name
    assert key_activity.prefix in officer.get(KEYS).content.decode()
    filtered = officer.get(INJECTIONS, {"client__exact": key_activity.label})
    assert filtered.status_code == 200
