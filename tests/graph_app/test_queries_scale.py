"""Reads that must stay cheap as a project grows: time travel decided over the project's
timeline kept in memory (a page reads only its own rows; a write is caught up by the rows it
stamped), the entity query's ego graph walked in memory and paged, and integrity verification
since a checkpoint reading only the log after it and the records it touched. Each test checks
the answer against the full computation and counts the work: queries issued, rows read, the
index a statement uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit_app.models import audit_maintenance
from graph_app import entity_reads, graph_caches, graph_head, integrity, time_travel
from graph_app.contracts.integrity import IntegrityInput
from graph_app.fact_writes import fact_retract, fact_upsert
from graph_app.models import Entity, GraphChange, GraphRevision, TemporalFact
from memoryproject.domain.hashing import merkle_root
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import utcnow


def _log_head(project) -> tuple[int, str]:
    """The graph head's change log size and last hash."""
    head = graph_head.graph_head(project)
    return head.changes, head.head_hash


pytestmark = pytest.mark.django_db

FACTS = TemporalFact._meta.db_table
CHANGES = GraphChange._meta.db_table


@pytest.fixture(autouse=True)
def _fresh_timelines():
    graph_caches.timeline_forget()
    yield
    graph_caches.timeline_forget()


def _history(project) -> dict:
    """Supersession, a scheduled successor, a retraction and a backdated fact, with an
    instant recorded between the writes."""
    fact = fact_upsert
    fact(project=project, subject_id="auth", predicate="token", object_value="JWT",
         valid_from="2025-01-01T00:00:00Z")  # fmt: skip
    fact(project=project, subject_id="auth", predicate="owner", object_value="core")
    between = utcnow()
    fact(project=project, subject_id="auth", predicate="token", object_value="PASETO",
         valid_from="2025-06-01T00:00:00Z")  # fmt: skip
    fact(project=project, subject_id="auth", predicate="token", object_value="OPAQUE",
         valid_from=(utcnow() + timedelta(days=30)).isoformat())  # fmt: skip
    retracted = fact(project=project, subject_id="auth", predicate="store",
                     object_value="redis", singular=False)["fact"]["id"]  # fmt: skip
    fact_retract(project=project, fact_id=retracted)
    fact(project=project, subject_id="auth", predicate="region", object_value="eu",
         valid_from="2024-01-01T00:00:00Z")  # fmt: skip
    # Backdated into the history of a singular predicate: the fact starting latest wins.
    fact(project=project, subject_id="auth", predicate="token", object_value="LEGACY",
         valid_from="2025-02-01T00:00:00Z")  # fmt: skip
    for n in range(12):
        fact(project=project, subject_id=f"svc_{n:02d}", predicate="depends_on",
             object_entity="auth", singular=False)  # fmt: skip
    return {"between": between}


def _reference(project, as_of, known_at):
    """The answer computed over every row by the database (facts_visible_at)."""
    facts = time_travel.facts_visible_at(project=project, as_of=as_of, known_at=known_at)
    return [f.fact.as_json() for f in facts], merkle_root([f.leaf for f in facts])


@pytest.mark.parametrize("when", ["now", "between", "2025-03-01", "2025-07-01"])
def test_time_travel_over_the_timeline_answers_what_the_rows_say(default_project, when):
    marks = _history(default_project)
    now = utcnow()
    as_of = {"now": now, "between": marks["between"]}.get(when) or datetime.fromisoformat(
        when
    ).replace(tzinfo=UTC)
    for known_at in (now, marks["between"]):
        facts, root = _reference(default_project, as_of, known_at)
        pages, offset = [], 0
        while offset is not None:
            page = time_travel.graph_as_of(
                project=default_project, as_of=as_of, known_at=known_at, limit=5, offset=offset
            )
            assert page.count == len(facts) and page.snapshot_hash == root
            pages += [f.as_json() for f in page.facts]
            offset = page.next_offset
        assert pages == facts


def test_a_page_of_time_travel_reads_only_its_own_rows(default_project):
    _history(default_project)
    as_of = utcnow()
    first = time_travel.graph_as_of(project=default_project, as_of=as_of, limit=5)
    assert first.count > 10
    with CaptureQueriesContext(connection) as queries:
        second = time_travel.graph_as_of(
            project=default_project, as_of=as_of, limit=5, offset=first.next_offset
        )
    assert [f.id for f in second.facts] == sorted(f.id for f in second.facts)
    fact_reads = [q["sql"] for q in queries if FACTS in q["sql"]]
    # The revision check, then the page's five rows by primary key: nothing else.
    assert len(queries) == 2 and len(fact_reads) == 1
    assert '"id" IN (' in fact_reads[0] and fact_reads[0].count("'fact_") == 5


def test_a_write_is_caught_up_by_the_rows_it_stamped(default_project):
    _history(default_project)
    as_of = utcnow() + timedelta(seconds=1)
    time_travel.graph_as_of(project=default_project, as_of=as_of)
    fact_upsert(
        project=default_project, subject_id="auth", predicate="owner", object_value="platform"
    )
    with CaptureQueriesContext(connection) as queries:
        after = time_travel.graph_as_of(project=default_project, as_of=utcnow())
    catch_up = [q["sql"] for q in queries if FACTS in q["sql"] and "revision" in q["sql"]]
    assert len(catch_up) == 1 and '"revision" >' in catch_up[0]
    owners = [f.object_value for f in after.facts if f.predicate == "owner"]
    assert owners == ["platform"]
    facts, root = _reference(default_project, after.as_of, after.known_at)
    assert after.snapshot_hash == root and [f.as_json() for f in after.facts] == facts


def test_a_graph_that_went_back_is_read_again_not_served_stale(default_project):
    _history(default_project)
    as_of = utcnow()
    before = time_travel.graph_as_of(project=default_project, as_of=as_of)
    # Rows changed behind the cache's back with the head reset: the lines are rebuilt.
    TemporalFact.objects.filter(project=default_project, predicate="region").update(
        object_value="us"
    )
    GraphRevision.objects.filter(project=default_project).update(head_hash="f" * 64)
    after = time_travel.graph_as_of(project=default_project, as_of=as_of)
    assert after.snapshot_hash != before.snapshot_hash
    assert "us" in {f.object_value for f in after.facts if f.predicate == "region"}


# --- entity query -----------------------------------------------------------------------------


def _star(project, spokes: int) -> None:
    for n in range(spokes):
        fact_upsert(
            project=project,
            subject_id=f"svc_{n:03d}",
            predicate="depends_on",
            object_entity="hub",
            singular=False,
        )
        fact_upsert(
            project=project,
            subject_id=f"svc_{n:03d}",
            predicate="calls",
            object_entity=f"leaf_{n:03d}",
            singular=False,
        )


def test_the_ego_graph_is_paged_with_its_totals(default_project):
    _star(default_project, 30)
    full = entity_reads._ego_graph(Entity.objects.get(project=default_project, slug="hub"), 2)
    seen_nodes, seen_edges, offset = [], [], 0
    while offset is not None:
        page = entity_reads.entity_query(
            project=default_project, entity_id="hub", max_hops=2, limit=7, offset=offset
        )
        assert page.totals["nodes"] == len(full.nodes) == 61
        assert page.totals["edges"] == len(full.edges) == 60
        assert len(page.ego_graph.nodes) <= 7 and len(page.ego_graph.edges) <= 7
        seen_nodes += page.ego_graph.nodes
        seen_edges += page.ego_graph.edges
        offset = page.next_offset
    assert seen_nodes == full.nodes and seen_edges == full.edges


def test_the_entity_query_issues_as_many_queries_whatever_the_graph_size(default_project):
    def issued(slug: str) -> int:
        entity_reads.entity_query(project=default_project, entity_id=slug)  # warm the timeline
        with CaptureQueriesContext(connection) as queries:
            entity_reads.entity_query(project=default_project, entity_id=slug, max_hops=3)
        return len(queries)

    _star(default_project, 3)
    small = issued("hub")
    _star(default_project, 40)
    assert issued("hub") == small <= 8


def test_an_edge_ended_or_scheduled_is_not_in_the_ego_graph(default_project):
    _star(default_project, 2)
    gone = fact_upsert(
        project=default_project, subject_id="old", predicate="calls", object_entity="hub",
        singular=False,
    )["fact"]["id"]  # fmt: skip
    fact_retract(project=default_project, fact_id=gone)
    fact_upsert(
        project=default_project, subject_id="next", predicate="calls", object_entity="hub",
        singular=False, valid_from=(utcnow() + timedelta(days=3)).isoformat(),
    )  # fmt: skip
    page = entity_reads.entity_query(project=default_project, entity_id="hub")
    nodes = {n.id for n in page.ego_graph.nodes}
    assert "old" not in nodes and "next" not in nodes and "svc_000" in nodes


# --- integrity since a checkpoint -------------------------------------------------------------


def _verify_since(project, size, head):
    return integrity.integrity_verify(
        project=project, checkpoint_size=size, checkpoint_head=head, since_checkpoint=True
    )


def test_verifying_since_a_checkpoint_reads_only_the_log_after_it(default_project):
    _history(default_project)
    size, head = _log_head(default_project)
    fact_upsert(
        project=default_project, subject_id="auth", predicate="owner", object_value="platform"
    )
    with CaptureQueriesContext(connection) as queries:
        report = _verify_since(default_project, size, head)
    assert report.verified is True and report.scope == "since_checkpoint"
    assert report.checkpoint.consistent is True and report.merkle_root == ""
    # The upsert closed one fact and asserted another; the checkpoint's own entry is re-read.
    assert report.facts == 3 and report.episodes == 0
    log_reads = [q["sql"] for q in queries if CHANGES in q["sql"]]
    assert len(log_reads) == 1 and '"seq" >=' in log_reads[0]
    assert not [q for q in queries if FACTS in q["sql"] and " IN (" not in q["sql"]]
    full = integrity.integrity_verify(project=default_project)
    assert full.verified is True and full.scope == "full" and full.facts > report.facts


def test_a_record_changed_since_the_checkpoint_is_named(default_project):
    _history(default_project)
    size, head = _log_head(default_project)
    new = fact_upsert(
        project=default_project, subject_id="auth", predicate="owner", object_value="platform"
    )["fact"]["id"]
    TemporalFact.objects.filter(pk=new).update(object_value="nobody")
    report = _verify_since(default_project, size, head)
    assert report.verified is False
    assert {(p.kind, p.id) for p in report.problems} == {("mismatch", new)}


def test_an_entry_after_the_checkpoint_edited_or_a_moved_checkpoint_is_named(default_project):
    _history(default_project)
    size, head = _log_head(default_project)
    fact_upsert(
        project=default_project, subject_id="auth", predicate="owner", object_value="platform"
    )
    with audit_maintenance():
        GraphChange.objects.filter(project=default_project, seq=size + 1).update(note="edited")
    report = _verify_since(default_project, size, head)
    assert ("chain", "change", str(size + 1)) in {
        (p.kind, p.record_type, p.id) for p in report.problems
    }
    other = GraphChange.objects.get(project=default_project, seq=size - 1).hash
    moved = _verify_since(default_project, size, other)
    assert moved.checkpoint.consistent is False


def test_since_checkpoint_needs_a_checkpoint():
    with pytest.raises(ApplicationError) as error:
        IntegrityInput.parse({"since_checkpoint": True})
    assert error.value.field == "since_checkpoint"


def _plans(queries) -> list[str]:
    """SQLite's plan of each statement captured (their parameters are inlined)."""
    plans = []
    with connection.cursor() as cursor:
        for query in queries:
            cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
            plans.append(" ".join(str(row[-1]) for row in cursor.fetchall()))
    return plans


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_the_reads_go_through_their_indexes(default_project):
    _history(default_project)
    size, head = _log_head(default_project)
    as_of = utcnow()
    time_travel.graph_as_of(project=default_project, as_of=as_of, limit=5)
    fact_upsert(
        project=default_project, subject_id="auth", predicate="owner", object_value="platform"
    )
    with CaptureQueriesContext(connection) as queries:
        time_travel.graph_as_of(project=default_project, as_of=as_of, limit=5, offset=5)
        entity_reads.entity_query(project=default_project, entity_id="auth")
        _verify_since(default_project, size, head)
    plans = _plans(queries)
    assert plans and not [p for p in plans if "SCAN" in p]  # every statement searches an index
    log = [p for p, q in zip(plans, queries, strict=True) if CHANGES in q["sql"]]
    assert any("seq>?" in p for p in log)
    changed = [p for p, q in zip(plans, queries, strict=True) if '"revision" >' in q["sql"]]
    assert changed and all("graph_fact_proj_rev" in p for p in changed)


def test_a_page_past_the_end_or_an_empty_graph_is_empty_not_an_error(default_project):
    empty = time_travel.graph_as_of(project=default_project, as_of=utcnow())
    assert empty.count == 0 and empty.facts == [] and empty.next_offset is None
    _history(default_project)
    past = time_travel.graph_as_of(project=default_project, as_of=utcnow(), offset=500)
    assert past.count > 0 and past.facts == [] and past.next_offset is None
