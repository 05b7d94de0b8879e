"""Facts: supersession, idempotence, backdated history, non-singular values, retraction,
validation that writes nothing, and revision stamping for cached indexes."""

import pytest

from graph_app import graph_head, integrity, time_travel
from graph_app.entity_writes import entity_upsert
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_retract, fact_upsert
from graph_app.index_selectors import episode_rows_changed_since, fact_rows_changed_since
from graph_app.models import Entity, GraphRevision, TemporalFact
from memoryproject.errors import ApplicationError, ConflictError, NotFoundError
from memoryproject.models import Project

pytestmark = pytest.mark.django_db

JAN = "2026-01-10T00:00:00Z"
FEB = "2026-02-01T00:00:00Z"
APR = "2026-04-20T00:00:00Z"


def upsert(project, value, valid_from=None, **kw):
    kw.setdefault("subject_id", "auth_service")
    kw.setdefault("predicate", "uses_token_format")
    return fact_upsert(project=project, object_value=value, valid_from=valid_from, **kw)


def test_entities_are_created_on_first_mention(default_project):
    upsert(default_project, "x", object_entity="token_lib", predicate="uses")
    assert set(Entity.objects.values_list("slug", flat=True)) == {"auth_service", "token_lib"}


def test_new_value_closes_active_fact_and_lists_it(default_project):
    first = upsert(default_project, "JWT_HS256", JAN)
    second = upsert(default_project, "PASETO_v4_public", APR)
    assert second["outcome"] == "active" and second["created"]
    [old] = second["superseded"]
    assert old["id"] == first["fact"]["id"]
    assert old["valid_until"] == APR
    assert old["superseded_by"] == second["fact"]["id"]
    assert old["status"] == "superseded"
    active = TemporalFact.objects.filter(valid_until__isnull=True)
    assert [f.object_value for f in active] == ["PASETO_v4_public"]


def test_reasserting_the_active_fact_writes_nothing(default_project):
    first = upsert(default_project, "JWT_HS256", JAN)
    revision = graph_head.graph_head(default_project).revision
    again = upsert(default_project, "JWT_HS256")
    assert again["outcome"] == "unchanged" and not again["created"]
    assert again["fact"]["id"] == first["fact"]["id"]
    assert TemporalFact.objects.count() == 1
    assert graph_head.graph_head(default_project).revision == revision


def test_backdated_fact_is_history_and_does_not_replace_active(default_project):
    upsert(default_project, "JWT_HS256", JAN)
    paseto = upsert(default_project, "PASETO_v4_public", APR)
    backdated = upsert(default_project, "JWT_RS256", FEB)
    assert backdated["outcome"] == "history" and backdated["superseded"] == []
    assert backdated["fact"]["valid_until"] == APR
    assert backdated["fact"]["superseded_by"] == paseto["fact"]["id"]
    active = TemporalFact.objects.get(valid_until__isnull=True)
    assert active.object_value == "PASETO_v4_public"
    # Time travel into the backdated interval shows the value learned last for it.
    march = time_travel.graph_as_of(project=default_project, as_of="2026-03-01T00:00:00Z")
    assert [f["object_value"] for f in march["facts"]] == ["JWT_RS256"]


def test_backdated_before_everything_is_closed_at_first_fact(default_project):
    first = upsert(default_project, "JWT_HS256", FEB)
    early = upsert(default_project, "BASIC_AUTH", JAN)
    assert early["fact"]["valid_until"] == FEB
    assert early["fact"]["superseded_by"] == first["fact"]["id"]
    assert TemporalFact.objects.get(valid_until__isnull=True).object_value == "JWT_HS256"


def test_non_singular_predicate_keeps_several_active_values(default_project):
    for value in ("redis", "postgres", "redis"):
        fact_upsert(
            project=default_project,
            subject_id="billing",
            predicate="stores_data_in",
            object_value=value,
            singular=False,
        )
    active = TemporalFact.objects.filter(valid_until__isnull=True)
    assert sorted(f.object_value for f in active) == ["postgres", "redis"]


def test_retract_closes_without_replacement(default_project):
    fact = upsert(default_project, "JWT_HS256", JAN)["fact"]
    result = fact_retract(project=default_project, fact_id=fact["id"], at=FEB)
    assert result["fact"]["valid_until"] == FEB
    assert result["fact"]["status"] == "retracted"
    assert result["fact"]["superseded_by"] is None
    assert not TemporalFact.objects.filter(valid_until__isnull=True).exists()
    with pytest.raises(ConflictError):
        fact_retract(project=default_project, fact_id=fact["id"])
    with pytest.raises(NotFoundError):
        fact_retract(project=default_project, fact_id="fact_missing")


def test_retract_before_valid_from_is_refused(default_project):
    fact = upsert(default_project, "JWT_HS256", FEB)["fact"]
    with pytest.raises(ApplicationError) as info:
        fact_retract(project=default_project, fact_id=fact["id"], at=JAN)
    assert info.value.field == "at"


def test_a_retracted_fact_leaves_room_for_a_new_active_one(default_project):
    fact = upsert(default_project, "JWT_HS256", JAN)["fact"]
    fact_retract(project=default_project, fact_id=fact["id"], at=FEB)
    result = upsert(default_project, "PASETO_v4_public", APR)
    assert result["outcome"] == "active" and result["superseded"] == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"subject_id": ""}, "subject_id"),
        ({"subject_id": "has space"}, "subject_id"),
        ({"subject_id": "x" * 129}, "subject_id"),
        ({"predicate": ""}, "predicate"),
        ({"predicate": "p" * 129}, "predicate"),
        ({"object_value": ""}, "object_value"),
        ({"object_value": "v" * 2001}, "object_value"),
        ({"valid_from": "2026-01-10T00:00:00"}, "valid_from"),
        ({"valid_from": "last tuesday"}, "valid_from"),
        ({"confidence": 1.5}, "confidence"),
        ({"singular": "yes"}, "singular"),
        ({"source_episode": "ep_nope"}, "source_episode"),
        ({"object_entity": "bad entity"}, "object_entity"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(default_project, kwargs, field):
    args = {
        "project": default_project,
        "subject_id": "auth_service",
        "predicate": "uses",
        "object_value": "v",
        **kwargs,
    }
    with pytest.raises(ApplicationError) as info:
        fact_upsert(**args)
    assert info.value.field == field
    assert field in info.value.message
    assert not TemporalFact.objects.exists()
    assert not Entity.objects.exists()
    assert graph_head.graph_head(default_project).revision == 0


def test_every_write_bumps_revision_and_stamps_changed_rows(default_project):
    first = upsert(default_project, "JWT_HS256", JAN)["fact"]
    assert first["revision"] == 1
    second = upsert(default_project, "PASETO_v4_public", APR)
    assert second["fact"]["revision"] == 2
    assert second["superseded"][0]["revision"] == 2  # the closed fact changed too
    changed = fact_rows_changed_since(project=default_project, revision=1)
    assert {f["id"] for f in changed} == {first["id"], second["fact"]["id"]}
    episode = episode_record(
        project=default_project, title="Move to PASETO", category="adr", content="why"
    )
    assert episode["revision"] == 3
    assert [e["id"] for e in episode_rows_changed_since(project=default_project, revision=2)] == [
        episode["id"]
    ]
    assert list(fact_rows_changed_since(project=default_project, revision=3)) == []
    assert GraphRevision.objects.get(project=default_project).revision == 3


def test_projects_are_separate_graphs(default_project):
    other = Project.objects.create(slug="other", name="other")
    upsert(default_project, "JWT_HS256", JAN)
    result = upsert(other, "PASETO_v4_public", APR)
    assert result["superseded"] == []  # the other project's fact is not this one's history
    assert graph_head.graph_head(other).revision == 1


def test_history_links_cannot_be_deleted_alone_but_a_project_can(default_project):
    from django.db.models import RestrictedError

    other = Project.objects.create(slug="scratch", name="scratch")
    upsert(other, "JWT_HS256", JAN)
    new = upsert(other, "PASETO_v4_public", APR)["fact"]
    episode_record(
        project=other, title="t", category="adr", content="c", entities_mentioned=["auth_service"]
    )
    with pytest.raises(RestrictedError):
        TemporalFact.objects.get(pk=new["id"]).delete()
    other.delete()
    assert not TemporalFact.objects.exists() and not Entity.objects.exists()


def test_reasserting_a_retracted_fact_makes_it_true_again(default_project):
    fact = upsert(default_project, "JWT_HS256", JAN)["fact"]
    fact_retract(project=default_project, fact_id=fact["id"])
    again = upsert(default_project, "JWT_HS256", JAN)
    assert again["created"] and again["outcome"] == "active"
    assert TemporalFact.objects.get(valid_until__isnull=True).id == again["fact"]["id"]


def test_retraction_and_entity_renames_reach_the_change_feed(default_project):
    fact = upsert(default_project, "JWT_HS256", JAN)["fact"]
    retracted = fact_retract(project=default_project, fact_id=fact["id"])["fact"]
    assert retracted["revision"] == 2
    assert [f["id"] for f in fact_rows_changed_since(project=default_project, revision=1)] == [
        fact["id"]
    ]
    entity_upsert(project=default_project, entity_id="auth_service", name="Auth")
    changed = fact_rows_changed_since(project=default_project, revision=2)
    assert [(f["id"], f["subject__name"]) for f in changed] == [(fact["id"], "Auth")]
    assert integrity.integrity_verify(project=default_project)["verified"] is True
