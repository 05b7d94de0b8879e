"""The admin console lists entities, facts and episodes; facts and episodes are read-only."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model

from tests.graph_app.factories import EpisodeFactory, FactFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", "", "pw-for-tests-only")
    client.force_login(user)
    return client


def test_graph_pages_list_rows_and_refuse_edits(admin_client):
    fact = FactFactory(subject_id="auth_service", object_value="PASETO_v4_public")
    episode = EpisodeFactory(title="Move to PASETO", entities_mentioned=["auth_service"])
    for url, text in [
        ("/admin/graph_app/entity/", "auth_service"),
        ("/admin/graph_app/temporalfact/", "PASETO_v4_public"),
        ("/admin/graph_app/episode/", "Move to PASETO"),
        # The admin quotes keys in its URLs ("_" starts an escape), as its own links do.
        (f"/admin/graph_app/episode/{quote(episode.pk)}/change/", "Move to PASETO"),
        (f"/admin/graph_app/temporalfact/{quote(fact.pk)}/change/", "PASETO_v4_public"),
    ]:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert text in response.content.decode(), url
    assert admin_client.get("/admin/graph_app/episode/add/").status_code == 403
    assert admin_client.get("/admin/graph_app/temporalfact/add/").status_code == 403
    page = admin_client.get(f"/admin/graph_app/episode/{quote(episode.pk)}/change/")
    page = page.content.decode()
    assert 'name="_save"' not in page
