"""The "Compliance officer" group: reads the audit trail, sessions and graph, exports the log
and decides reviews, and changes nothing else anywhere: every page of every registered admin
that adds, changes or deletes answers 403 and leaves the rows as they were."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.forms.models import model_to_dict

from audit_app.models import InjectionRecord, Review
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from memoryproject.models import Project
from memoryproject.roles import COMPLIANCE_OFFICER, compliance_officer_group_ensure
from memoryproject.services import api_key_create
from sessions_app.plan import plan_context
from sessions_app.session_memory import session_save
from sessions_app.trace_writes import trace_record
from tests.sessions_app.factories import STRUCTURED_SUMMARY

pytestmark = pytest.mark.django_db

READABLE_APPS = {"audit_app", "sessions_app", "graph_app"}


@pytest.fixture
def officer(client):
    user = get_user_model().objects.create_user("officer", password="pw-for-tests-only")
    user.is_staff = True
    user.save()
    user.groups.add(Group.objects.get(name=COMPLIANCE_OFFICER))
    client.force_login(user)
    return client


@pytest.fixture
def world():
    """At least one row behind most admin pages: traces, a summary, a plan that was flagged
    (and so queued for review), graph rows, a receipt, an API key."""
    demo = Project.objects.get_or_create(slug="demo")[0]
    trace_record(project=demo, model="m", active_project="billing")
    session_save(project=demo, summary=STRUCTURED_SUMMARY)
    fact_upsert(project=demo, subject_id="payments", predicate="token", object_value="jwt")
    fact_upsert(project=demo, subject_id="payments", predicate="token", object_value="paseto")
    episode_record(project=demo, title="Move to PASETO", category="adr", content="why")
    plan_context(project=demo, mode="force")
    plan_context(project=demo, trust_threshold=1.0)  # flagged
    api_key_create(name="k", project_slugs=["demo"], scope="read", create_projects=False)
    return demo


def test_the_group_holds_view_export_and_review_and_nothing_else():
    group = Group.objects.get(name=COMPLIANCE_OFFICER)
    held = {(p.content_type.app_label, p.codename) for p in group.permissions.all()}
    views = {
        (model._meta.app_label, f"view_{model._meta.model_name}")
        for label in READABLE_APPS
        for model in apps.get_app_config(label).get_models()
    }
    extra = {("audit_app", "export_injectionrecord"), ("audit_app", "decide_review")}
    assert held == views | extra
    assert not [c for _, c in held if c.startswith(("add_", "change_", "delete_"))]


def test_the_group_comes_back_after_a_flush_but_an_edit_is_kept():
    Group.objects.filter(name=COMPLIANCE_OFFICER).delete()
    group = compliance_officer_group_ensure(apps, replace=False)
    assert group.permissions.count() > 2
    group.permissions.remove(group.permissions.get(codename="export_injectionrecord"))
    compliance_officer_group_ensure(apps, replace=False)
    assert not group.permissions.filter(codename="export_injectionrecord").exists()


def _snapshot(model) -> list[dict]:
    return [model_to_dict(row) for row in model._default_manager.order_by("pk")]


def test_an_officer_reads_everything_audited_and_changes_nothing_anywhere(officer, world):
    checked = 0
    for model in admin.site._registry:
        info = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        readable = model._meta.app_label in READABLE_APPS
        listing = officer.get(info)
        assert listing.status_code == (200 if readable else 403), info
        assert officer.get(f"{info}add/").status_code == 403, info
        assert officer.post(f"{info}add/", {}).status_code == 403, info
        before = _snapshot(model)
        row = model._default_manager.order_by("pk").first()
        if row is not None:
            pk = quote(row.pk)  # as the admin builds its URLs ('_' starts an escape)
            page = officer.get(f"{info}{pk}/change/")
            assert page.status_code == (200 if readable else 403), info
            assert 'name="_save"' not in page.content.decode(), info
            assert officer.post(f"{info}{pk}/change/", {"name": "x"}).status_code == 403, info
            assert officer.get(f"{info}{pk}/delete/").status_code == 403, info
            assert officer.post(f"{info}{pk}/delete/", {"post": "yes"}).status_code == 403, info
            officer.post(
                info, {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"}
            )
            checked += 1
        assert _snapshot(model) == before, info
    assert checked >= 8  # the world above reaches most pages


def test_an_officer_can_export_the_log(officer, world):
    page = officer.get("/admin/audit_app/injectionrecord/").content.decode()
    assert "export_link" in page
    assert officer.get("/admin/audit_app/injectionrecord/export/").status_code == 200


def test_an_officer_can_decide_a_review(officer, world):
    review = Review.objects.get(project=world, state="open")
    response = officer.post(
        f"/admin/audit_app/review/{review.pk}/decide/",
        {"decision": "reject", "reason": "the context is stale"},
    )
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.state == "rejected"
    assert InjectionRecord.objects.filter(source="review").exists() or review.decision_seq
