"""The memory browser: an entity's facts now and as of a date (valid time and recorded time),
its history on both time axes, its episodes and its 2-hop neighbourhood, for staff who may view
entities; paginated, in a fixed number of queries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from graph_app.console.selectors import EPISODES_PER_PAGE, FACTS_PER_PAGE, HISTORY_PER_PAGE
from graph_app.entity_writes import entity_upsert
from memoryproject.models import Project
from tests.graph_app.factories import EpisodeFactory, FactFactory

pytestmark = pytest.mark.django_db

URL = "/console/graph/default/auth_service/"
JAN = datetime(2026, 1, 10, tzinfo=UTC)
MAR = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def viewer(client):
    """A staff user who may view entities (and nothing else)."""
    user = get_user_model().objects.create_user("viewer", password="pw-for-tests-only")
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="view_entity"))
    client.force_login(user)
    return client


@pytest.fixture
def token_history():
    """auth_service used JWT from January (recorded in January) and PASETO from March
    (recorded in March); it depends on key_vault, which depends on hsm_cluster."""
    with time_machine.travel(JAN, tick=False):
        jwt = FactFactory(
            subject_id="auth_service",
            predicate="uses_token_format",
            object_value="JWT_HS256",
            valid_from=JAN,
        )
    with time_machine.travel(MAR, tick=False):
        paseto = FactFactory(
            subject_id="auth_service",
            predicate="uses_token_format",
            object_value="PASETO_v4_public",
            valid_from=MAR,
        )
    FactFactory(
        subject_id="auth_service",
        predicate="depends_on",
        object_entity="key_vault",
        object_value=None,
        singular=False,
        valid_from=JAN,
    )
    FactFactory(
        subject_id="key_vault",
        predicate="depends_on",
        object_entity="hsm_cluster",
        object_value=None,
        singular=False,
        valid_from=JAN,
    )
    FactFactory(
        subject_id="hsm_cluster",
        predicate="depends_on",
        object_entity="far_away",
        object_value=None,
        singular=False,
        valid_from=JAN,
    )
    EpisodeFactory(
        title="Move to PASETO",
        entities_mentioned=["auth_service"],
        occurred_at=MAR,
        content="We replaced HS256 JWTs with PASETO v4 public tokens.",
    )
    return jwt, paseto


def _html(response) -> str:
    return response.content.decode()


def test_entity_page_shows_current_facts_history_episodes_and_two_hop_graph(viewer, token_history):
    jwt, paseto = token_history
    response = viewer.get(URL)
    assert response.status_code == 200
    page = response.context["page"]
    assert {f.object_value for f in page.facts} == {"key_vault", "PASETO_v4_public"}
    assert {row.fact.id: row.fact.status for row in page.history_rows} == {
        paseto.id: "active",
        jwt.id: "superseded",
        **{f.id: "active" for f in page.history.object_list if f.predicate == "depends_on"},
    }
    html = _html(response)
    assert "Showing the entity now" in html
    facts_table = html[html.index('id="facts-table"') : html.index('id="history"')]
    assert '<time datetime="2026-03-01T00:00:00Z">2026-03-01 00:00:00</time>' in facts_table
    assert f'id="history-{jwt.id}" data-fact-id="{jwt.id}" data-status="superseded"' in html
    assert "Move to PASETO" in html
    # Two hops: key_vault (1) and hsm_cluster (2); far_away is three hops out.
    assert {n.id: n.hops for n in page.neighbourhood.nodes} == {
        "auth_service": 0,
        "key_vault": 1,
        "hsm_cluster": 2,
    }
    assert 'data-entity="hsm_cluster"' in html and "far_away" not in html
    assert '<svg id="neighbourhood-graph"' in html


def test_as_of_date_shows_the_superseded_fact_and_hides_later_episodes(viewer, token_history):
    jwt, _ = token_history
    response = viewer.get(URL, {"as_of": "2026-02-01T00:00:00"})
    assert response.status_code == 200
    page = response.context["page"]
    assert page.as_of == datetime(2026, 2, 1, tzinfo=UTC)
    assert "JWT_HS256" in [f.object_value for f in page.facts]
    assert "PASETO_v4_public" not in [f.object_value for f in page.facts]
    html = _html(response)
    assert "Showing the entity as of" in html
    assert (
        f'id="history-{jwt.id}" data-fact-id="{jwt.id}" data-status="superseded" class="mb-in-view"'
        in html
    )
    assert "Move to PASETO" not in html  # occurred in March


def test_known_at_reads_the_graph_as_it_was_recorded_then(viewer, token_history):
    # Asked in February about April: PASETO had not been recorded yet, so JWT still held.
    response = viewer.get(URL, {"as_of": "2026-04-01T00:00:00Z", "known_at": "2026-02-01T00:00"})
    values = [f.object_value for f in response.context["page"].facts]
    assert "JWT_HS256" in values and "PASETO_v4_public" not in values
    # Known now, April is PASETO.
    response = viewer.get(URL, {"as_of": "2026-04-01T00:00:00Z"})
    values = [f.object_value for f in response.context["page"].facts]
    assert "PASETO_v4_public" in values and "JWT_HS256" not in values


def test_a_fact_pointing_at_the_entity_is_shown_from_the_other_side(viewer, token_history):
    response = viewer.get("/console/graph/default/key_vault/")
    facts = response.context["page"].facts
    assert {(f.subject, f.object_value) for f in facts} == {
        ("auth_service", "key_vault"),
        ("key_vault", "hsm_cluster"),
    }


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"as_of": "last tuesday"}, "as_of: 'last tuesday' is not an ISO-8601 timestamp"),
        ({"known_at": "2026-13-01T00:00"}, "known_at: '2026-13-01T00:00' is not an ISO-8601"),
        ({"history_page": "0"}, "history_page: must be from 1 to 100000, got '0'"),
        ({"episodes_page": "two"}, "episodes_page: must be an integer"),
    ],
)
def test_a_bad_control_answers_400_naming_the_field_and_rule(viewer, token_history, query, message):
    response = viewer.get(URL, query)
    assert response.status_code == 400
    assert message in response.context["error"]
    assert 'id="browser-error" role="alert"' in _html(response)


def test_unknown_entity_or_project_is_404(viewer, token_history):
    assert viewer.get("/console/graph/default/nobody/").status_code == 404
    assert viewer.get("/console/graph/elsewhere/auth_service/").status_code == 404


def test_entity_ids_with_slashes_are_browsable(viewer):
    FactFactory(subject_id="src/auth/token.py", predicate="owned_by", object_value="team_a")
    response = viewer.get("/console/graph/default/src/auth/token.py/")
    assert response.status_code == 200
    assert [f.object_value for f in response.context["page"].facts] == ["team_a"]


def test_browser_is_for_staff_who_may_view_entities(client, token_history):
    assert client.get(URL).status_code == 302  # to the admin login
    assert "/admin/login/" in client.get(URL)["Location"]
    user = get_user_model().objects.create_user("clerk", password="pw-for-tests-only")
    user.is_staff = True
    user.save()
    client.force_login(user)
    assert client.get(URL).status_code == 403
    assert client.get("/console/graph/").status_code == 403


def test_facts_as_of_are_paginated_own_first(viewer):
    for n in range(FACTS_PER_PAGE + 5):
        FactFactory(subject_id="auth_service", predicate=f"flag_{n:02d}", object_value="on")
    FactFactory(
        subject_id="gateway", predicate="calls", object_entity="auth_service", object_value=None
    )
    first = viewer.get(URL).context["page"].facts
    assert len(first.object_list) == FACTS_PER_PAGE
    assert first.object_list[0].predicate == "flag_00"
    html = _html(viewer.get(URL))
    assert "?facts_page=2" in html
    second = viewer.get(URL, {"facts_page": 2}).context["page"].facts
    assert [f.predicate for f in second.object_list][-1] == "calls"  # pointing at it: last
    assert len(second.object_list) == 6


def test_history_and_episodes_are_paginated(viewer):
    for n in range(HISTORY_PER_PAGE + 3):
        FactFactory(subject_id="auth_service", predicate=f"flag_{n}", object_value="on")
    for n in range(EPISODES_PER_PAGE + 2):
        EpisodeFactory(title=f"Note {n}", entities_mentioned=["auth_service"])
    first = viewer.get(URL)
    assert first.context["page"].facts.paginator.count == HISTORY_PER_PAGE + 3
    assert len(first.context["page"].history_rows) == HISTORY_PER_PAGE
    assert first.context["page"].history.paginator.count == HISTORY_PER_PAGE + 3
    assert len(first.context["page"].episodes.object_list) == EPISODES_PER_PAGE
    assert "?history_page=2" in _html(first)
    second = viewer.get(URL, {"history_page": 2, "episodes_page": 2})
    assert len(second.context["page"].history_rows) == 3
    assert len(second.context["page"].episodes.object_list) == 2
    shown = {r.fact.id for r in first.context["page"].history_rows}
    assert shown.isdisjoint({r.fact.id for r in second.context["page"].history_rows})


def _grow(size: int, offset: int) -> None:
    for n in range(size):
        FactFactory(subject_id="auth_service", predicate=f"p_{offset + n}", object_value="v")
        FactFactory(
            subject_id="auth_service",
            predicate="calls",
            object_entity=f"svc_{offset + n}",
            object_value=None,
            singular=False,
        )
        FactFactory(
            subject_id=f"svc_{offset + n}",
            predicate="calls",
            object_entity=f"leaf_{offset + n}",
            object_value=None,
            singular=False,
        )
        EpisodeFactory(title=f"Episode {offset + n}", entities_mentioned=["auth_service"])


# A valid time after the facts the test writes now (a fixed date stopped being "after" once passed).
AFTER_EVERY_WRITE = "2099-01-01T00:00"


def test_entity_page_costs_the_same_queries_for_a_small_and_a_large_entity(
    viewer, django_assert_max_num_queries, token_history
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _grow(3, 0)
    with CaptureQueriesContext(connection) as small:
        assert viewer.get(URL, {"as_of": AFTER_EVERY_WRITE}).status_code == 200
    _grow(40, 100)
    with django_assert_max_num_queries(len(small)):
        response = viewer.get(URL, {"as_of": AFTER_EVERY_WRITE})
    assert response.status_code == 200
    assert len(response.context["page"].neighbourhood.nodes) > 80
    assert len(small) <= 16


def test_entity_list_searches_and_filters_by_project(viewer, token_history):
    Project.objects.create(slug="other")
    entity_upsert(project=Project.objects.get(slug="other"), entity_id="auth_gateway")
    html = _html(viewer.get("/console/graph/", {"q": "auth"}))
    assert "auth_service" in html and "auth_gateway" in html and "key_vault" not in html
    html = _html(viewer.get("/console/graph/", {"q": "auth", "project": "other"}))
    assert "auth_gateway" in html and "auth_service" not in html
    assert 'href="/console/graph/other/auth_gateway/"' in html


def test_entity_list_is_paginated_in_a_fixed_number_of_queries(
    viewer, django_assert_max_num_queries
):
    for n in range(60):
        entity_upsert(
            project=Project.objects.get_or_create(slug="default")[0],
            entity_id=f"entity_{n:02d}",
        )
    with django_assert_max_num_queries(8):
        response = viewer.get("/console/graph/")
    assert len(response.context["page"].object_list) == 50
    assert "?page=2" in _html(response)


def test_the_entity_admin_page_links_to_the_browser_and_the_index_lists_it(viewer, token_history):
    from graph_app.models import Entity

    entity = Entity.objects.get(slug="auth_service")
    page = _html(viewer.get(f"/admin/graph_app/entity/{entity.pk}/change/"))
    assert f'href="{URL}"' in page
    assert 'id="link-memory-browser" href="/console/graph/"' in _html(viewer.get("/admin/"))


def test_a_pointing_fact_superseded_since_shows_only_as_of_its_time(viewer):
    with time_machine.travel(JAN, tick=False):
        FactFactory(
            subject_id="billing",
            predicate="stores_in",
            object_entity="old_db",
            object_value=None,
            valid_from=JAN,
        )
    with time_machine.travel(MAR, tick=False):
        FactFactory(
            subject_id="billing",
            predicate="stores_in",
            object_entity="new_db",
            object_value=None,
            valid_from=MAR,
        )
    page = viewer.get("/console/graph/default/old_db/").context["page"]
    assert list(page.facts) == []
    assert [r.fact.status for r in page.history_rows] == ["superseded"]
    page = viewer.get("/console/graph/default/old_db/", {"as_of": "2026-02-01T00:00"}).context[
        "page"
    ]
    assert [(f.subject, f.object_value) for f in page.facts] == [("billing", "old_db")]
    assert [n.id for n in page.neighbourhood.nodes] == ["old_db", "billing"]
