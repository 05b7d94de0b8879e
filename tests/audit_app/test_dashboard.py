"""The dashboard: staff with the view permission on the injection log only; its totals and charts equal the records created; the period and
project filters change them; aggregates cost a fixed number of queries; charts are served
offline (vendored Chart.js through staticfiles)."""

from __future__ import annotations

import json
import re
from datetime import date, timedelta

import pytest
import time_machine
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from audit_app.domain.dashboard import day_series, histogram
from audit_app.injection_log import SOURCES
from audit_app.models import InjectionLogHead, InjectionRecord, Review
from memoryproject.timeutil import utcnow
from sessions_app.plan import plan_context
from sessions_app.session_memory import session_load
from tests.audit_app.log_tampering import build_log, edit
from tests.sessions_app.factories import ProjectFactory, SessionSummaryFactory, TraceFactory

pytestmark = pytest.mark.django_db

URL = "/console/dashboard/"
CHAIN = "/console/dashboard/chain/"


@pytest.fixture
def staff_client() -> Client:
    """Staff who may view the injection log (what the dashboard reads)."""
    user = User.objects.create_user("sam", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_injectionrecord"))
    client = Client()
    client.force_login(user)
    return client


def chart_data(response) -> dict:
    match = re.search(
        r'<script id="dashboard-data" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert match, "the page embeds its chart data"
    return json.loads(match.group(1))


def deliveries(project, *, injected: int = 0, flagged: int = 0, client: str = "agent") -> None:
    """``injected`` trusted plans and ``flagged`` untrusted ones, through the service."""
    for _ in range(injected):
        plan_context(project=project, channel="rest", client=client, mode="force")
    for _ in range(flagged):
        plan_context(project=project, channel="rest", client=client, trust_threshold=1.0)


@pytest.fixture
def two_projects(default_project):
    billing = ProjectFactory(slug="billing")
    for project in (default_project, billing):
        TraceFactory(project=project)
    return default_project, billing


def test_the_dashboard_needs_a_staff_login(default_project):
    anonymous = Client().get(URL)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    member = Client()
    member.force_login(User.objects.create_user("mia", password="pw"))
    assert member.get(URL).status_code == 302


def test_the_admin_index_links_to_the_dashboard(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert 'id="link-dashboard" href="/console/dashboard/"' in page
    assert 'id="link-review-queue"' in page


def test_the_totals_and_charts_equal_the_records_created(staff_client, two_projects):
    default, billing = two_projects
    deliveries(default, injected=3, flagged=2, client="claude-code")
    deliveries(billing, injected=1, client="cursor")
    plan_context(project=ProjectFactory(slug="fresh"), channel="rest", client="cursor")
    SessionSummaryFactory(project=default)
    session_load(project=default, channel="mcp", client="claude-code")

    response = staff_client.get(URL)
    assert response.status_code == 200
    data = chart_data(response)
    records = InjectionRecord.objects.filter(source__in=SOURCES)
    assert data["totals"]["deliveries"] == records.count() == 8
    assert (data["totals"]["injected"], data["totals"]["flagged"], data["totals"]["empty"]) == (
        5,
        2,
        1,
    )
    assert sum(data["by_status"]["injected"]) == 5 and len(data["days"]) == 30
    assert data["days"][-1] == utcnow().date().isoformat()
    assert sum(data["trust"]["counts"]) == 7  # the empty plan has no score worth drawing
    assert dict(zip(data["clients"]["labels"], data["clients"]["counts"], strict=True)) == {
        "claude-code": 6,
        "cursor": 2,
    }
    assert data["totals"]["open_reviews"] == Review.objects.filter(state="open").count() == 1
    share = [s for s in data["escalate_share"] if s is not None]
    assert share == [round(records.filter(decision="ESCALATE").count() / 8, 4)]
    page = response.content.decode()
    assert '<dd id="total-deliveries">8</dd>' in page
    assert '<dd id="open-reviews">1</dd>' in page
    assert 'data-src="/console/dashboard/chain/"' in page  # fetched by the page


def test_the_chain_status_says_verified_or_where_it_breaks(staff_client, default_project):
    build_log(default_project, 4)
    verified = staff_client.get(CHAIN).content.decode()
    assert 'data-verified="true"' in verified
    assert '<span id="chain-head-seq">4</span>' in verified
    assert InjectionLogHead.objects.get().last_hash in verified
    edit(3, client="someone else")
    broken = staff_client.get(CHAIN).content.decode()
    assert 'data-verified="false"' in broken and "broken at seq 3" in broken
    assert Client().get(CHAIN).status_code == 302  # staff only


def test_the_period_and_project_filters_change_the_totals(staff_client, two_projects):
    default, billing = two_projects
    with time_machine.travel(utcnow() - timedelta(days=20), tick=False):
        deliveries(default, injected=3)
    with time_machine.travel(utcnow() - timedelta(days=60), tick=False):
        deliveries(billing, injected=4)
    deliveries(default, injected=1)
    deliveries(billing, injected=2)

    def total(**query: str) -> int:
        return chart_data(staff_client.get(URL, query))["totals"]["deliveries"]

    assert total(days="7") == 3
    assert total() == total(days="30") == 6
    assert total(days="90") == 10
    assert total(days="90", project="billing") == 6
    assert total(days="7", project="default") == 1
    assert len(chart_data(staff_client.get(URL, {"days": "90"}))["days"]) == 90


def test_an_unknown_period_or_project_answers_400_naming_it(staff_client, default_project):
    wrong_period = staff_client.get(URL, {"days": "12"})
    assert wrong_period.status_code == 400 and b"days:" in wrong_period.content
    wrong_project = staff_client.get(URL, {"project": "nope"})
    assert wrong_project.status_code == 400 and b"project:" in wrong_project.content


def test_the_aggregates_cost_a_fixed_number_of_queries(staff_client, two_projects):
    default, billing = two_projects
    staff_client.get(URL)  # sessions, content types: warm

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert staff_client.get(URL, {"days": "30"}).status_code == 200
        return len(captured.captured_queries)

    deliveries(default, injected=2, flagged=1, client="a")
    few = queries()
    for n in range(6):
        deliveries(billing, injected=3, flagged=1, client=f"client-{n}")
    assert queries() == few
    assert few <= 16


def test_the_charts_are_drawn_by_the_vendored_chartjs_served_offline(staff_client, db):
    page = staff_client.get(URL).content.decode()
    scripts = re.findall(r'<script[^>]+src="([^"]+)"', page)
    assert "/static/vendor/chartjs/chart.umd.min.js" in scripts
    assert not [src for src in scripts if "://" in src or src.startswith("//")]
    served = Client().get("/static/vendor/chartjs/chart.umd.min.js")
    assert served.status_code == 200
    assert b"Chart.js v4" in b"".join(served.streaming_content)
    for canvas in ("chart-deliveries", "chart-trust", "chart-escalate", "chart-clients"):
        assert f'id="{canvas}"' in page


def test_the_series_count_zero_on_quiet_days_and_fold_a_perfect_score_into_the_top_bucket():
    first = date(2026, 11, 1)
    rows = [
        {"day": date(2026, 11, 1), "status": "injected", "n": 3, "escalate": 0},
        {"day": date(2026, 11, 1), "status": "flagged", "n": 1, "escalate": 1},
        {"day": date(2026, 11, 3), "status": "empty", "n": 2, "escalate": 2},
        {"day": date(2026, 10, 31), "status": "injected", "n": 9, "escalate": 0},  # outside
    ]
    series = day_series(rows, first, date(2026, 11, 3))
    assert series.by_status["injected"] == [3, 0, 0]
    assert series.escalate_share == [0.25, None, 1.0]
    assert (series.total, series.totals["flagged"]) == (6, 1)
    assert histogram([(0.0, 2), (7.0, 1), (9.0, 4), (None, 5)]) == [2, 0, 0, 0, 0, 0, 0, 1, 0, 4]
