"""Every console list and detail page reads a constant number of queries whatever the number
of rows (no query per row), and every row is titled by names people know, not database ids."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit_app.findings import contradictions_audit
from audit_app.models import AuditRun, ContradictionFinding
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.models import Entity, Episode, GraphChange, TemporalFact
from memoryproject.models import Project
from sessions_app.models import SessionSummary, Trace
from sessions_app.session_memory import session_save
from sessions_app.trace_writes import trace_record
from tests.sessions_app.factories import STRUCTURED_SUMMARY

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("auditor", "", "pw-for-tests-only")
    client.force_login(user)
    return client


def grow(project: Project, n: int) -> None:
    """``n`` more of every kind of row the console lists."""
    start = Trace.objects.filter(project=project).count()
    for i in range(start, start + n):
        trace_record(project=project, model=f"model-{i}", active_project=f"p{i}")
        session_save(project=project, summary=STRUCTURED_SUMMARY + f"\n{i}")
        fact_upsert(
            project=project,
            subject_id=f"service-{i}",
            predicate="uses_token_format",
            object_value="jwt",
        )
        fact_upsert(
            project=project,
            subject_id=f"service-{i}",
            predicate="token_format",
            object_value="paseto",
        )
        episode_record(project=project, title=f"Decision {i}", category="adr", content="why")
    contradictions_audit(project=project)


PAGES = {
    Trace: "/admin/sessions_app/trace/",
    SessionSummary: "/admin/sessions_app/sessionsummary/",
    Entity: "/admin/graph_app/entity/",
    TemporalFact: "/admin/graph_app/temporalfact/",
    Episode: "/admin/graph_app/episode/",
    GraphChange: "/admin/graph_app/graphchange/",
    AuditRun: "/admin/audit_app/auditrun/",
    ContradictionFinding: "/admin/audit_app/contradictionfinding/",
}


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(captured)


def _counts(client) -> dict[str, int]:
    counts = {}
    for model, url in PAGES.items():
        counts[url] = _queries(client, url)
        row = model._default_manager.order_by("pk").first()
        counts[f"{url}<pk>/change/"] = _queries(client, f"{url}{quote(row.pk)}/change/")
    return counts


def test_list_and_detail_pages_do_not_read_per_row(staff):
    demo = Project.objects.get_or_create(slug="demo")[0]
    grow(demo, 2)
    _counts(staff)  # warm the per-process caches (content types, sessions)
    small = _counts(staff)
    grow(demo, 20)
    assert _counts(staff) == small


def test_titles_name_things_people_know(staff):
    demo = Project.objects.get_or_create(slug="demo")[0]
    grow(demo, 1)
    fact = TemporalFact.objects.filter(object_value="jwt").get()
    assert str(fact) == "service-0 · uses_token_format = jwt"
    trace = Trace.objects.get(model="model-0")
    assert re.fullmatch(
        r"Trace of model-0 in demo — \w+, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \([0-9a-f-]{36}\)",
        str(trace),
    )
    assert str(Episode.objects.get()).startswith("Decision 0 (adr, ")
    assert str(ContradictionFinding.objects.first()).endswith("contradiction on service-0 — open")
    change = GraphChange.objects.filter(action="asserted").first()
    assert str(change).startswith(f"Change #{change.seq} in demo: fact asserted")
    assert str(AuditRun.objects.get()).startswith("Contradiction audit of demo, ")
    page = staff.get("/admin/graph_app/temporalfact/").content.decode()
    assert "service-0 · uses_token_format = jwt" in page
