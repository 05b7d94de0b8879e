"""Conflict-aware graph: future-dated facts are scheduled, not current; zero-width supersession
is refused; Cortex-style object values make edges; episodes are found by their own ids."""

from datetime import UTC, datetime

import pytest
import time_machine

from graph_app import entity_reads, graph_head, integrity, time_travel
from graph_app.compiler import context_compile
from graph_app.entity_writes import entity_upsert
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_retract, fact_upsert
from graph_app.index_cache import compiler_cache_clear
from graph_app.models import TemporalFact
from memoryproject.errors import ConflictError

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_compiler_cache():
    # Rolled-back tests reuse project ids and revisions: never let one see another's index.
    compiler_cache_clear()
    yield
    compiler_cache_clear()


JAN_2026 = "2026-01-01T00:00:00Z"
JAN_2030 = "2030-01-01T00:00:00Z"


def engine(project, value, valid_from, **kw):
    return fact_upsert(
        project=project,
        subject_id="db",
        predicate="engine",
        object_value=value,
        valid_from=valid_from,
        **kw,
    )


def compiled_engines(project, **kw):
    bundle = context_compile(project=project, query="db engine", max_tokens=400, **kw)
    return {
        v for v in ("postgres", "cockroach", "mysql") if f"--(engine)--> {v}" in bundle["markdown"]
    }


@pytest.fixture
def scheduled(default_project):
    postgres = engine(default_project, "postgres", JAN_2026)["fact"]
    cockroach = engine(default_project, "cockroach", JAN_2030)
    return postgres, cockroach


def test_a_future_fact_does_not_replace_the_current_truth(default_project, scheduled):
    postgres, cockroach = scheduled
    assert cockroach["fact"]["status"] == "scheduled"
    [closed] = cockroach["superseded"]
    assert closed["id"] == postgres["id"] and closed["status"] == "active"
    assert compiled_engines(default_project) == {"postgres"}
    view = entity_reads.entity_query(project=default_project, entity_id="db")
    assert [f["object_value"] for f in view["facts"]] == ["postgres"]
    assert [f["object_value"] for f in view["scheduled"]] == ["cockroach"]
    assert view["history"] == []


def test_the_future_fact_is_what_compiles_as_of_its_time(default_project, scheduled):
    assert compiled_engines(default_project, as_of="2031-01-01T00:00:00Z") == {"cockroach"}


def test_the_switch_happens_when_the_time_comes_with_no_write(default_project, scheduled):
    assert compiled_engines(default_project) == {"postgres"}
    revision = graph_head.graph_head(default_project).revision
    with time_machine.travel(datetime(2030, 6, 1, tzinfo=UTC)):
        assert compiled_engines(default_project) == {"cockroach"}
        view = entity_reads.entity_query(project=default_project, entity_id="db")
        assert [f["object_value"] for f in view["facts"]] == ["cockroach"]
        assert [f["object_value"] for f in view["history"]] == ["postgres"]
    assert graph_head.graph_head(default_project).revision == revision


def test_retracting_the_future_fact_later_leaves_postgres_current(default_project, scheduled):
    _, cockroach = scheduled
    fact_retract(
        project=default_project, fact_id=cockroach["fact"]["id"], at="2040-01-01T00:00:00Z"
    )
    assert compiled_engines(default_project) == {"postgres"}


def test_cancelling_the_future_fact_lets_postgres_go_on(default_project, scheduled):
    _, cockroach = scheduled
    cancelled = fact_retract(project=default_project, fact_id=cockroach["fact"]["id"])
    assert cancelled["fact"]["valid_until"] == cancelled["fact"]["valid_from"] == JAN_2030
    assert compiled_engines(default_project) == {"postgres"}
    later = time_travel.graph_as_of(project=default_project, as_of="2031-01-01T00:00:00Z")
    assert [f["object_value"] for f in later["facts"]] == ["postgres"]
    assert integrity.integrity_verify(project=default_project)["verified"] is True


def test_a_current_value_between_takes_over_until_the_scheduled_one(default_project, scheduled):
    mysql = engine(default_project, "mysql", "2026-06-01T00:00:00Z")
    assert mysql["outcome"] == "history"
    assert mysql["fact"]["valid_until"] == JAN_2030
    assert compiled_engines(default_project) == {"mysql"}
    assert compiled_engines(default_project, as_of="2031-01-01T00:00:00Z") == {"cockroach"}
    postgres = TemporalFact.objects.get(object_value="postgres")
    assert postgres.valid_until == datetime(2026, 6, 1, tzinfo=UTC)


def test_active_filter_means_valid_now(api, scheduled):
    active = api.get("/v1/graph/facts", {"active": "true"}).json()["results"]
    assert [f["object_value"] for f in active] == ["postgres"]
    other = api.get("/v1/graph/facts", {"active": "false"}).json()["results"]
    assert [f["object_value"] for f in other] == ["cockroach"]


def test_a_new_value_from_the_same_instant_is_refused(default_project):
    engine(default_project, "postgres", JAN_2026)
    with pytest.raises(ConflictError) as error:
        engine(default_project, "mysql", JAN_2026)
    assert error.value.field == "valid_from"
    assert TemporalFact.objects.count() == 1


def test_the_database_refuses_a_zero_width_supersession(default_project):
    from django.db import IntegrityError, transaction

    first = engine(default_project, "postgres", JAN_2026)["fact"]
    second = engine(default_project, "mysql", "2026-02-01T00:00:00Z")["fact"]
    with pytest.raises(IntegrityError), transaction.atomic():
        TemporalFact.objects.filter(pk=first["id"]).update(
            valid_until=datetime(2026, 1, 1, tzinfo=UTC), superseded_by_id=second["id"]
        )


# --- edges the Cortex way ---------------------------------------------------------------------


def test_object_value_of_a_relational_predicate_is_an_edge(default_project):
    result = fact_upsert(
        project=default_project,
        subject_id="order_repository",
        predicate="depends_on",
        object_value="payment_ledger",
        singular=False,
    )
    assert result["fact"]["object_entity"] == "payment_ledger"
    view = entity_reads.entity_query(
        project=default_project, entity_id="payment_ledger", max_hops=2
    )
    assert "order_repository" in {n["id"] for n in view["ego_graph"]["nodes"]}


def test_object_value_naming_a_known_entity_links_it_other_text_stays_text(default_project):
    entity_upsert(project=default_project, entity_id="redis_cache", kind="service")
    linked = fact_upsert(
        project=default_project,
        subject_id="session_store",
        predicate="backed_by",
        object_value="redis_cache",
    )
    text = fact_upsert(
        project=default_project, subject_id="session_store", predicate="ttl", object_value="30m"
    )
    assert linked["fact"]["object_entity"] == "redis_cache"
    assert text["fact"]["object_entity"] is None
    again = fact_upsert(
        project=default_project,
        subject_id="session_store",
        predicate="backed_by",
        object_value="redis_cache",
    )
    assert again["outcome"] == "unchanged"


def test_two_hop_activation_follows_cortex_edges_to_an_invariant(default_project):
    episode_record(
        project=default_project,
        title="Ledger postings are append-only",
        category="invariant",
        content="Never update or delete a posting; corrections are new reversing postings.",
        entities_mentioned=["payment_ledger"],
        external_id="INV-7",
    )
    for noise in range(15):
        episode_record(
            project=default_project,
            title=f"Checkout note {noise}",
            category="session_note",
            content=f"order_repository pagination tweak {noise} before refactoring queries",
            entities_mentioned=["order_repository"],
        )
    fact_upsert(
        project=default_project,
        subject_id="order_repository",
        predicate="depends_on",
        object_value="payment_ledger",
        singular=False,
    )
    bundle = context_compile(
        project=default_project,
        query="what must I know before changing how order_repository calls its dependencies",
        max_tokens=600,
    )
    assert "[INVARIANT:INV-7]" in bundle["citations"]


# --- lookups by the ids agents see ---------------------------------------------------------------


def test_episodes_are_found_by_external_id_and_by_citation(api, default_project):
    recorded = episode_record(
        project=default_project,
        title="Move tokens to PASETO",
        category="adr",
        content="HS256 secrets were shared.",
        external_id="ADR-12",
    )
    for ref in ("ADR-12", "[ADR:ADR-12]", recorded["id"], f"[ADR:{recorded['id']}]"):
        response = api.get(f"/v1/graph/episodes/{ref}")
        assert response.status_code == 200, (ref, response.content)
        assert response.json()["id"] == recorded["id"]
    assert api.get("/v1/graph/episodes/ADR-99").status_code == 404


def test_facts_are_found_by_citation(api, default_project):
    fact = engine(default_project, "postgres", JAN_2026)["fact"]
    response = api.get(f"/v1/graph/facts/[FACT:{fact['id']}]")
    assert response.status_code == 200 and response.json()["id"] == fact["id"]


def test_a_malformed_citation_is_a_json_404(api):
    response = api.get("/v1/graph/episodes/[ADR:")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
