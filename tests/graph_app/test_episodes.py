"""Episodes: immutable, hashed, linked to the entities they mention, external ids unique."""

import pytest

from graph_app import entity_reads, graph_head
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.models import Episode
from memoryproject.errors import ApplicationError, ConflictError

pytestmark = pytest.mark.django_db


def record(project, **kw):
    args = {
        "project": project,
        "title": "Move tokens to PASETO",
        "category": "adr",
        "content": "HS256 shared secrets leaked into logs; PASETO v4 public keys instead.",
        "files_touched": ["src/auth/tokens.py"],
        "entities_mentioned": ["auth_service"],
        "occurred_at": "2026-04-20T09:00:00Z",
        **kw,
    }
    return episode_record(**args)


def test_record_answers_id_and_sha256_and_links_entities(default_project):
    episode = record(default_project, metadata={"speaker": "Ana", "session": "s1"})
    assert episode["id"].startswith("ep_") and len(episode["sha256"]) == 64
    assert episode["created"] is True
    assert episode["metadata"] == {"speaker": "Ana", "session": "s1"}
    query = entity_reads.entity_query(project=default_project, entity_id="auth_service")
    assert [e["id"] for e in query["episodes"]] == [episode["id"]]


def test_same_external_id_same_content_is_idempotent(default_project):
    first = record(default_project, external_id="D1:3")
    again = record(default_project, external_id="D1:3")
    assert again["id"] == first["id"] and again["created"] is False
    assert Episode.objects.count() == 1


def test_same_external_id_different_content_conflicts(default_project):
    record(default_project, external_id="D1:3")
    with pytest.raises(ConflictError) as info:
        record(default_project, external_id="D1:3", content="something else")
    assert info.value.field == "external_id"


def test_metadata_changes_the_hash(default_project):
    a = record(default_project, external_id="a", metadata={"speaker": "Ana"})
    b = record(default_project, external_id="b", metadata={"speaker": "Bo"})
    assert a["sha256"] != b["sha256"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"category": "gossip"}, "category"),
        ({"title": ""}, "title"),
        ({"title": "t" * 301}, "title"),
        ({"content": "c" * 50_001}, "content"),
        ({"files_touched": [f"f{i}.py" for i in range(201)]}, "files_touched"),
        ({"files_touched": ["x" * 501]}, "files_touched[0]"),
        ({"files_touched": "src/a.py"}, "files_touched"),
        ({"entities_mentioned": ["no spaces allowed"]}, "entities_mentioned[0]"),
        ({"occurred_at": "2026-04-20 09:00"}, "occurred_at"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"metadata": {"x": float("nan")}}, "metadata"),
    ],
)
def test_bad_episode_input_names_the_field_and_writes_nothing(default_project, kwargs, field):
    with pytest.raises(ApplicationError) as info:
        record(default_project, **kwargs)
    assert info.value.field == field
    assert not Episode.objects.exists()
    assert graph_head.graph_head(default_project).revision == 0


def test_fact_can_cite_its_source_episode(default_project):
    episode = record(default_project)
    fact = fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        source_episode=episode["id"],
    )["fact"]
    assert fact["source_episode"] == episode["id"]


def test_a_nul_inside_metadata_is_refused_on_every_database(api):
    body = {"title": "t", "category": "adr", "content": "c", "metadata": {"note": "a\x00b"}}
    response = api.post("/v1/graph/episodes", body, format="json")
    assert response.status_code == 400 and "metadata" in response.json()["fields"]
    assert "NUL" in response.json()["message"]
