"""Reading the graph: the token-format scenario, ego graphs, bi-temporal time travel and
integrity verification that names rows changed behind the application's back."""

from datetime import timedelta

import pytest
from django.db import connection

from graph_app import entity_reads, integrity, time_travel
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_retract, fact_upsert
from graph_app.models import Episode, TemporalFact
from memoryproject.errors import ApplicationError, NotFoundError
from memoryproject.timeutil import iso, utcnow

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario(default_project):
    p = default_project
    jwt = fact_upsert(
        project=p,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="JWT_HS256",
        valid_from="2026-01-10T00:00:00Z",
    )["fact"]
    paseto = fact_upsert(
        project=p,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        valid_from="2026-04-20T00:00:00Z",
    )["fact"]
    edge = fact_upsert(
        project=p,
        subject_id="order_repository",
        predicate="depends_on",
        object_entity="payment_ledger",
        singular=False,
    )["fact"]
    fact_upsert(
        project=p,
        subject_id="checkout_api",
        predicate="depends_on",
        object_entity="order_repository",
        singular=False,
    )
    fact_upsert(
        project=p,
        subject_id="storefront",
        predicate="depends_on",
        object_entity="checkout_api",
        singular=False,
    )
    return {"jwt": jwt, "paseto": paseto, "edge": edge}


def test_active_graph_shows_only_paseto(default_project, scenario):
    now = time_travel.graph_as_of(project=default_project, as_of=iso(utcnow()))
    values = {f["object_value"] for f in now["facts"] if f["subject"] == "auth_service"}
    assert values == {"PASETO_v4_public"}


def test_time_travel_to_february_shows_jwt(default_project, scenario):
    feb = time_travel.graph_as_of(project=default_project, as_of="2026-02-01T00:00:00Z")
    assert [(f["subject"], f["object_value"]) for f in feb["facts"]] == [
        ("auth_service", "JWT_HS256")
    ]


def test_entity_history_shows_supersession_with_both_dates(default_project, scenario):
    result = entity_reads.entity_query(project=default_project, entity_id="auth_service")
    assert [f["object_value"] for f in result["facts"]] == ["PASETO_v4_public"]
    [old] = result["history"]
    assert old["object_value"] == "JWT_HS256"
    assert old["valid_from"] == "2026-01-10T00:00:00Z"
    assert old["valid_until"] == "2026-04-20T00:00:00Z"
    assert old["superseded_by"] == scenario["paseto"]["id"]
    with_history = entity_reads.entity_query(
        project=default_project, entity_id="auth_service", include_superseded=True
    )
    assert {f["object_value"] for f in with_history["facts"]} == {"JWT_HS256", "PASETO_v4_public"}


def test_two_hop_ego_graph_follows_edges_both_ways(default_project, scenario):
    ego = entity_reads.entity_query(project=default_project, entity_id="payment_ledger")[
        "ego_graph"
    ]
    hops = {n["id"]: n["hops"] for n in ego["nodes"]}
    assert hops == {"payment_ledger": 0, "order_repository": 1, "checkout_api": 2}
    assert any(
        e["source"] == "order_repository" and e["target"] == "payment_ledger" for e in ego["edges"]
    )
    wider = entity_reads.entity_query(
        project=default_project, entity_id="payment_ledger", max_hops=3
    )
    assert "storefront" in {n["id"] for n in wider["ego_graph"]["nodes"]}


def test_ego_graph_ignores_retracted_edges(default_project, scenario):
    fact_retract(project=default_project, fact_id=scenario["edge"]["id"])
    ego = entity_reads.entity_query(project=default_project, entity_id="payment_ledger")[
        "ego_graph"
    ]
    assert [n["id"] for n in ego["nodes"]] == ["payment_ledger"]


@pytest.mark.parametrize("hops", [-1, 6, "2"])
def test_max_hops_outside_range_is_refused(default_project, scenario, hops):
    with pytest.raises(ApplicationError) as info:
        entity_reads.entity_query(project=default_project, entity_id="auth_service", max_hops=hops)
    assert info.value.field == "max_hops"


def test_unknown_entity_is_not_found(default_project):
    with pytest.raises(NotFoundError):
        entity_reads.entity_query(project=default_project, entity_id="nobody")


def test_fact_recorded_after_known_at_is_invisible(default_project, scenario):
    # Known before the PASETO fact was recorded: JWT still open, PASETO unknown.
    known = TemporalFact.objects.get(pk=scenario["paseto"]["id"]).recorded_at - timedelta(
        microseconds=1
    )
    then = time_travel.graph_as_of(
        project=default_project, as_of="2026-06-01T00:00:00Z", known_at=iso(known)
    )
    [jwt] = [f for f in then["facts"] if f["subject"] == "auth_service"]
    assert jwt["object_value"] == "JWT_HS256"
    assert jwt["valid_until"] is None and jwt["status"] == "active"
    # A backdated fact recorded now is invisible to a view of the past, even for its own dates.
    before = iso(utcnow())
    fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="JWT_RS256",
        valid_from="2026-02-01T00:00:00Z",
    )
    past = time_travel.graph_as_of(
        project=default_project, as_of="2026-03-01T00:00:00Z", known_at=before
    )
    assert [f["object_value"] for f in past["facts"] if f["subject"] == "auth_service"] == [
        "JWT_HS256"
    ]


def test_snapshot_hash_is_stable_and_tracks_content(default_project, scenario):
    known = iso(utcnow())
    a = time_travel.graph_as_of(
        project=default_project, as_of="2026-02-01T00:00:00Z", known_at=known
    )
    fact_upsert(project=default_project, subject_id="later", predicate="is", object_value="new")
    b = time_travel.graph_as_of(
        project=default_project, as_of="2026-02-01T00:00:00Z", known_at=known
    )
    assert a["snapshot_hash"] == b["snapshot_hash"] and len(a["snapshot_hash"]) == 64
    june = time_travel.graph_as_of(project=default_project, as_of="2026-06-01T00:00:00Z")
    assert june["snapshot_hash"] != a["snapshot_hash"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"as_of": "2026-02-01T00:00:00"}, "as_of"),
        ({"as_of": None}, "as_of"),
        ({"as_of": "2026-02-01T00:00:00Z", "known_at": "soon"}, "known_at"),
    ],
)
def test_time_travel_bad_timestamps(default_project, kwargs, field):
    with pytest.raises(ApplicationError) as info:
        time_travel.graph_as_of(project=default_project, **kwargs)
    assert info.value.field == field


def test_integrity_verifies_a_clean_graph(default_project, scenario):
    episode_record(
        project=default_project, title="t", category="incident", content="c", metadata={"a": 1}
    )
    report = integrity.integrity_verify(project=default_project)
    assert report["verified"] is True
    assert (report["facts"], report["episodes"]) == (5, 1)
    assert report["mismatched_ids"] == [] and len(report["merkle_root"]) == 64
    assert (
        integrity.integrity_verify(project=default_project)["merkle_root"] == report["merkle_root"]
    )


def test_raw_sql_update_of_a_fact_object_is_named(default_project, scenario):
    before = integrity.integrity_verify(project=default_project)
    table = TemporalFact._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET object_value = %s WHERE id = %s",
            ["JWT_NONE", scenario["jwt"]["id"]],
        )
    report = integrity.integrity_verify(project=default_project)
    assert report["verified"] is False
    assert report["mismatched_ids"] == [scenario["jwt"]["id"]]
    assert report["merkle_root"] != before["merkle_root"]


def test_raw_sql_reopening_a_superseded_fact_is_named(default_project, scenario):
    # Validity is sealed too: silently clearing valid_until would resurrect a stale truth.
    table = TemporalFact._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET valid_from = %s WHERE id = %s",
            ["2025-01-01 00:00:00", scenario["jwt"]["id"]],
        )
    assert integrity.integrity_verify(project=default_project)["mismatched_ids"] == [
        scenario["jwt"]["id"]
    ]


def test_raw_sql_update_of_an_episode_is_named(default_project):
    episode = episode_record(
        project=default_project, title="Root cause", category="bug_root_cause", content="race"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Episode._meta.db_table} SET content = %s WHERE id = %s",
            ["nothing happened", episode["id"]],
        )
    report = integrity.integrity_verify(project=default_project)
    assert report["mismatches"] == [
        {
            "kind": "episode",
            "id": episode["id"],
            "stored": episode["sha256"],
            "computed": report["mismatches"][0]["computed"],
        }
    ]
