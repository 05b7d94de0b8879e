"""The /v1/graph REST API: same answers as the services, 400s naming the field with nothing
written, pagination and filters, and project isolation (another project's items are 404)."""

import pytest

from graph_app.models import Episode, TemporalFact

pytestmark = pytest.mark.django_db


def post_fact(api, **body):
    body = {"subject_id": "auth_service", "predicate": "uses_token_format", **body}
    return api.post("/v1/graph/facts", body, format="json")


def test_fact_upsert_and_supersession_over_rest(api):
    first = post_fact(api, object_value="JWT_HS256", valid_from="2026-01-10T00:00:00Z")
    assert first.status_code == 201
    second = post_fact(api, object_value="PASETO_v4_public", valid_from="2026-04-20T00:00:00Z")
    assert second.status_code == 201
    body = second.json()
    assert body["outcome"] == "active"
    assert body["superseded"][0]["id"] == first.json()["fact"]["id"]
    again = post_fact(api, object_value="PASETO_v4_public")
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged"


def test_fact_list_filters_and_pagination(api):
    post_fact(api, object_value="JWT_HS256", valid_from="2026-01-10T00:00:00Z")
    post_fact(api, object_value="PASETO_v4_public", valid_from="2026-04-20T00:00:00Z")
    for i in range(3):
        post_fact(api, subject_id=f"svc_{i}", predicate="owner", object_value="team_a")
    page = api.get("/v1/graph/facts", {"limit": 2}).json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]
    active = api.get("/v1/graph/facts", {"subject": "auth_service", "active": "true"}).json()[
        "results"
    ]
    assert [f["object_value"] for f in active] == ["PASETO_v4_public"]
    old = api.get("/v1/graph/facts", {"active": "false"}).json()["results"]
    assert [f["object_value"] for f in old] == ["JWT_HS256"]
    feb = api.get(
        "/v1/graph/facts", {"valid_at": "2026-02-01T00:00:00Z", "predicate": "uses_token_format"}
    ).json()["results"]
    assert [f["object_value"] for f in feb] == ["JWT_HS256"]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"valid_at": "2026-02-01T00:00:00"}, "valid_at"), ({"active": "maybe"}, "active")],
)
def test_fact_list_bad_filters_are_400(api, params, field):
    response = api.get("/v1/graph/facts", params)
    assert response.status_code == 400
    assert field in response.json()["fields"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"object_value": "v", "subject_id": ""}, "subject_id"),
        ({"object_value": "v", "predicate": ""}, "predicate"),
        ({"object_value": "v", "predicate": "p" * 200}, "predicate"),
        ({"object_value": "v" * 2001}, "object_value"),
        ({"object_value": "v", "valid_from": "2026-01-10T00:00:00"}, "valid_from"),
        ({"object_value": "v", "valid_from": "2026-99-10T00:00:00Z"}, "valid_from"),
        ({"object_value": "v", "singular": "perhaps"}, "singular"),
        ({"object_value": "v", "confidence": 7}, "confidence"),
    ],
)
def test_bad_fact_input_is_400_naming_field_and_writes_nothing(api, body, field):
    response = post_fact(api, **body)
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]
    assert not TemporalFact.objects.exists()


def test_retract_over_rest(api):
    fact = post_fact(api, object_value="JWT_HS256", valid_from="2026-01-10T00:00:00Z").json()
    fact_id = fact["fact"]["id"]
    response = api.post(
        f"/v1/graph/facts/{fact_id}/retract", {"at": "2026-03-01T00:00:00Z"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["fact"]["status"] == "retracted"
    assert api.post(f"/v1/graph/facts/{fact_id}/retract", {}, format="json").status_code == 409
    assert api.get(f"/v1/graph/facts/{fact_id}").json()["valid_until"] == "2026-03-01T00:00:00Z"


def test_episodes_over_rest(api):
    body = {
        "title": "Ledger writes must be idempotent",
        "category": "invariant",
        "content": "Retries replay writes; the ledger dedupes by request id.",
        "files_touched": ["src/payments/ledger.py", "src/payments/retry.py"],
        "entities_mentioned": ["payment_ledger"],
        "occurred_at": "2026-03-05T10:00:00Z",
        "external_id": "INV-7",
        "metadata": {"author": "sam"},
    }
    created = api.post("/v1/graph/episodes", body, format="json")
    assert created.status_code == 201
    episode = created.json()
    assert api.post("/v1/graph/episodes", body, format="json").status_code == 200
    api.post(
        "/v1/graph/episodes",
        {
            "title": "Outage",
            "category": "incident",
            "content": "db failover",
            "occurred_at": "2026-05-01T00:00:00Z",
        },
        format="json",
    )
    detail = api.get(f"/v1/graph/episodes/{episode['id']}").json()
    assert detail["sha256"] == episode["sha256"] and detail["metadata"] == {"author": "sam"}

    def ids(params):
        return [e["id"] for e in api.get("/v1/graph/episodes", params).json()["results"]]

    assert ids({"category": "invariant"}) == [episode["id"]]
    assert ids({"entity": "payment_ledger"}) == [episode["id"]]
    assert ids({"file": "src/payments"}) == [episode["id"]]
    assert ids({"file": "src/payments/ledger.py"}) == [episode["id"]]
    assert ids({"file": "src/pay"}) == []
    assert ids(
        {"occurred_after": "2026-03-01T00:00:00Z", "occurred_before": "2026-04-01T00:00:00Z"}
    ) == [episode["id"]]
    assert len(ids({})) == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"category": "gossip"}, "category"),
        ({"title": ""}, "title"),
        ({"title": "t" * 301}, "title"),
        ({"content": "c" * 50_001}, "content"),
        ({"occurred_at": "2026-03-05"}, "occurred_at"),
        ({"files_touched": ["p" * 501]}, "files_touched[0]"),
        ({"files_touched": [f"f{i}" for i in range(201)]}, "files_touched"),
    ],
)
def test_bad_episode_input_is_400_naming_field_and_writes_nothing(api, body, field):
    base = {"title": "t", "category": "adr", "content": "c"}
    response = api.post("/v1/graph/episodes", {**base, **body}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]
    assert not Episode.objects.exists()


def test_episode_list_bad_category_and_timestamp(api):
    assert "category" in api.get("/v1/graph/episodes", {"category": "gossip"}).json()["fields"]
    response = api.get("/v1/graph/episodes", {"occurred_after": "yesterday"})
    assert response.status_code == 400 and "occurred_after" in response.json()["fields"]


def test_entities_entity_query_time_travel_and_integrity(api):
    post_fact(api, object_value="JWT_HS256", valid_from="2026-01-10T00:00:00Z")
    post_fact(api, object_value="PASETO_v4_public", valid_from="2026-04-20T00:00:00Z")
    api.post(
        "/v1/graph/facts",
        {
            "subject_id": "order_repository",
            "predicate": "depends_on",
            "object_entity": "payment_ledger",
            "singular": False,
        },
        format="json",
    )
    entities = api.get("/v1/graph/entities").json()
    assert [e["id"] for e in entities["results"]] == [
        "auth_service",
        "order_repository",
        "payment_ledger",
    ]
    entity = api.get("/v1/graph/entities/auth_service", {"include_superseded": "false"}).json()
    assert [f["object_value"] for f in entity["facts"]] == ["PASETO_v4_public"]
    assert entity["history"][0]["valid_until"] == "2026-04-20T00:00:00Z"
    ego = api.get("/v1/graph/entities/payment_ledger", {"max_hops": 2}).json()["ego_graph"]
    assert "order_repository" in {n["id"] for n in ego["nodes"]}
    assert api.get("/v1/graph/entities/auth_service", {"max_hops": 6}).status_code == 400
    bad = api.get("/v1/graph/entities/auth_service", {"max_hops": "two"})
    assert bad.status_code == 400 and "max_hops" in bad.json()["fields"]
    assert api.get("/v1/graph/entities/nobody").status_code == 404

    feb = api.get("/v1/graph/time-travel", {"as_of": "2026-02-01T00:00:00Z"}).json()
    assert [f["object_value"] for f in feb["facts"]] == ["JWT_HS256"]
    assert api.get("/v1/graph/time-travel", {"as_of": "2026-02-01"}).status_code == 400
    missing = api.get("/v1/graph/time-travel")
    assert missing.status_code == 400 and "as_of" in missing.json()["fields"]

    report = api.get("/v1/graph/integrity").json()
    assert report["verified"] is True and report["facts"] == 3


def test_other_projects_items_are_not_found(api, client_for):
    fact = post_fact(api, object_value="JWT_HS256").json()["fact"]
    episode = api.post(
        "/v1/graph/episodes", {"title": "t", "category": "adr", "content": "c"}, format="json"
    ).json()
    stranger = client_for("write", ("elsewhere",))
    assert stranger.get(f"/v1/graph/episodes/{episode['id']}").status_code == 404
    assert stranger.get(f"/v1/graph/facts/{fact['id']}").status_code == 404
    assert (
        stranger.post(f"/v1/graph/facts/{fact['id']}/retract", {}, format="json").status_code == 404
    )
    assert stranger.get("/v1/graph/entities/auth_service").status_code == 404
    assert stranger.get("/v1/graph/facts").json()["count"] == 0
    assert stranger.get("/v1/graph/facts", {"project": "default"}).status_code == 404
    assert post_fact(stranger, object_value="x", project="default").status_code == 403
    assert TemporalFact.objects.get(pk=fact["id"]).valid_until is None


def test_read_key_cannot_write(client_for):
    reader = client_for("read", ("default",))
    assert post_fact(reader, object_value="x").status_code == 403
    assert reader.get("/v1/graph/facts").status_code == 200


def test_schema_documents_graph_routes(api):
    paths = api.get("/v1/schema/", {"format": "json"}).json()["paths"]
    assert "/v1/graph/facts" in paths and "/v1/graph/time-travel" in paths


def test_entity_kind_name_and_aliases_can_be_set(api):
    response = api.post(
        "/v1/graph/entities",
        {
            "entity_id": "payment_ledger",
            "kind": "module",
            "name": "Payment ledger",
            "aliases": ["ledger"],
        },
        format="json",
    )
    assert response.status_code == 200
    listed = api.get("/v1/graph/entities", {"kind": "module"}).json()["results"]
    # The write's answer is the entity as listed, with what screening found in it.
    answer = response.json()
    assert answer.pop("screening") == {"masked": [], "flagged": []}
    assert listed == [answer]
    assert response.json()["aliases"] == ["ledger"]
    bad = api.post("/v1/graph/entities", {"entity_id": "a b"}, format="json")
    assert bad.status_code == 400 and "entity_id" in bad.json()["fields"]
