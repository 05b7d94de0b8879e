"""The graph's change log: every write appends a chained entry, the log is append-only at every
level, and integrity verification compares the tables with it as a set, so each tampering an
attacker with database access could try is detected and the right record named."""

from __future__ import annotations

import importlib
import itertools
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from audit_app.models import audit_maintenance
from graph_app import change_log_reads, entity_reads, graph_head, integrity, record_canonical
from graph_app.domain.records import change_hash, sha256_of
from graph_app.entity_writes import entity_upsert
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_retract, fact_upsert
from graph_app.models import Entity, Episode, EpisodeFile, GraphChange, GraphRevision, TemporalFact
from graph_app.record_erasure import ERASED_TEXT, graph_record_erase
from memoryproject.append_only import AppendOnlyError
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.errors import ApplicationError, NotFoundError
from memoryproject.models import Project
from tests.conftest import on_postgres


def _log_head(project) -> tuple[int, str]:
    """The graph head's change log size and last hash."""
    head = graph_head.graph_head(project)
    return head.changes, head.head_hash


pytestmark = pytest.mark.django_db


@dataclass
class Graph:
    project: Project
    jwt: str
    paseto: str
    edge: str
    episode: str


@pytest.fixture
def graph(default_project) -> Graph:
    p = default_project
    jwt = fact_upsert(
        project=p,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="JWT_HS256",
        valid_from="2025-01-01T00:00:00Z",
    )["fact"]["id"]
    paseto = fact_upsert(
        project=p,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        valid_from="2025-06-01T00:00:00Z",
    )["fact"]["id"]
    edge = fact_upsert(
        project=p,
        subject_id="order_service",
        predicate="depends_on",
        object_value="payment_ledger",
        singular=False,
    )["fact"]["id"]
    episode = episode_record(
        project=p,
        title="Move to PASETO",
        category="adr",
        content="JWT_HS256 keys leaked in logs; PASETO v4 public keys live in the vault.",
        files_touched=["src/auth/tokens.py", "src/auth/keys.py"],
        entities_mentioned=["auth_service", "key_vault"],
    )["id"]
    entity_upsert(
        project=p, entity_id="auth_service", kind="service", name="Auth", aliases=["authn"]
    )
    return Graph(project=p, jwt=jwt, paseto=paseto, edge=edge, episode=episode)


def verify(graph: Graph, **checkpoint: Any) -> Any:
    return integrity.integrity_verify(project=graph.project, **checkpoint)


def named(report: Any) -> set[tuple[str, str, str]]:
    return {(p["kind"], p["record_type"], p["id"]) for p in report["problems"]}


def sql(statement: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def entries(project: Project) -> list[GraphChange]:
    return list(GraphChange.objects.filter(project=project).order_by("seq"))


def rehash(entry: GraphChange, project: Project) -> str:
    fields = {f: getattr(entry, f) for f in change_log_reads.CHANGE_FIELDS if f != "hash"}
    return change_hash(project=project.slug, **fields)


def fact_sha(fact_id: str) -> str:
    fact = TemporalFact.objects.select_related(*record_canonical.FACT_RELATED).get(pk=fact_id)
    row = record_canonical.instance_row(fact, record_canonical.FACT_VALUE_FIELDS)
    return sha256_of(record_canonical.fact_canonical_of(row, fact.project.slug))


def episode_sha(episode: Episode) -> str:
    row = record_canonical.instance_row(episode, record_canonical.EPISODE_VALUE_FIELDS)
    return sha256_of(record_canonical.episode_canonical_of(row, episode.project.slug))


# --- every write appends ----------------------------------------------------------------------


def test_every_write_appends_one_chained_entry_per_record_it_touched(graph):
    log = [(e.action, e.record_type, e.record_id) for e in entries(graph.project)]
    assert log == [
        ("created", "entity", "auth_service"),
        ("asserted", "fact", graph.jwt),
        ("closed", "fact", graph.jwt),  # superseded by PASETO
        ("asserted", "fact", graph.paseto),
        ("created", "entity", "order_service"),
        ("created", "entity", "payment_ledger"),  # the edge's object, on first mention
        ("asserted", "fact", graph.edge),
        ("created", "entity", "key_vault"),
        ("recorded", "episode", graph.episode),
        ("changed", "entity", "auth_service"),  # kind, name and aliases
    ]
    chain = entries(graph.project)
    assert chain[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(chain))
    assert all(rehash(e, graph.project) == e.hash for e in chain)
    assert _log_head(graph.project) == (len(chain), chain[-1].hash)
    head = GraphRevision.objects.get(project=graph.project)
    assert (head.changes, head.head_hash) == (len(chain), chain[-1].hash)
    report = verify(graph)
    assert report["verified"] is True and report["problems"] == []
    assert report["chain"] == {"size": len(chain), "head": chain[-1].hash}
    assert (report["facts"], report["episodes"], report["entities"]) == (3, 1, 4)


def test_writes_that_change_nothing_append_nothing(graph):
    size = graph_head.graph_head(graph.project).changes
    again = fact_upsert(
        project=graph.project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
    )
    assert again["outcome"] == "unchanged"
    entity_upsert(project=graph.project, entity_id="auth_service", name="Auth")
    assert graph_head.graph_head(graph.project).changes == size


def test_retraction_cancellation_and_supersession_are_sealed(graph):
    fact_retract(project=graph.project, fact_id=graph.edge)
    scheduled = fact_upsert(
        project=graph.project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v5",
        valid_from="2999-01-01T00:00:00Z",
    )["fact"]["id"]
    fact_retract(project=graph.project, fact_id=scheduled)  # cancelled
    tail = [(e.action, e.record_id) for e in entries(graph.project)][-5:]
    assert tail[0] == ("closed", graph.edge)
    assert tail[1:4] == [("closed", graph.paseto), ("asserted", scheduled), ("closed", scheduled)]
    assert tail[4][0] == "asserted"  # PASETO_v4 continues from where v5 would have begun
    assert verify(graph)["verified"] is True


# --- append-only --------------------------------------------------------------------------------


def test_the_orm_refuses_to_change_or_delete_entries(graph):
    entry = entries(graph.project)[0]
    entry.record_id = "forged"
    with pytest.raises(AppendOnlyError):
        entry.save()
    with pytest.raises(AppendOnlyError):
        entry.delete()
    with pytest.raises(AppendOnlyError):
        GraphChange.objects.filter(pk=entry.pk).update(record_id="forged")
    with pytest.raises(AppendOnlyError):
        GraphChange.objects.filter(pk=entry.pk).delete()
    assert GraphChange.objects.get(pk=entry.pk).record_id == "auth_service"


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE graph_app_graphchange SET record_sha256 = 'x' WHERE id = %s",
        "DELETE FROM graph_app_graphchange WHERE id = %s",
    ],
)
def test_the_database_refuses_update_and_delete_of_entries(graph, statement):
    entry = entries(graph.project)[0]
    with pytest.raises(DatabaseError), transaction.atomic():
        sql(statement, [entry.pk])
    assert GraphChange.objects.get(pk=entry.pk).record_sha256 == entry.record_sha256
    # The maintenance gate lets it through, inside its own transaction only.
    with audit_maintenance():
        sql(statement, [entry.pk])
    with pytest.raises(DatabaseError), transaction.atomic():
        sql("DELETE FROM graph_app_graphchange", [])


def test_postgres_refuses_truncate_of_the_log(graph):
    if not on_postgres():
        pytest.skip("TRUNCATE is PostgreSQL's")
    with pytest.raises(DatabaseError), transaction.atomic():
        sql("TRUNCATE graph_app_graphchange", [])
    assert GraphChange.objects.filter(project=graph.project).exists()


def test_deleting_a_project_keeps_the_record_of_its_graph(default_project):
    scratch = Project.objects.create(slug="scratch", name="scratch")
    fact_upsert(project=scratch, subject_id="a", predicate="p", object_value="v")
    size = graph_head.graph_head(scratch).changes
    pk = scratch.pk
    scratch.delete()
    assert GraphChange.objects.filter(project_id=pk).count() == size


def test_the_migration_seals_records_that_predate_the_log_as_a_baseline(graph):
    from django.apps import apps

    migration = importlib.import_module("graph_app.migrations.0004_change_log")
    # The graph as it stood before the log existed: its rows, no entries, no head.
    with audit_maintenance():
        GraphChange.objects.filter(project=graph.project).delete()
    GraphRevision.objects.filter(project=graph.project).update(changes=0, head_hash=GENESIS_HASH)
    assert {p["kind"] for p in verify(graph)["problems"]} == {"inserted"}
    migration.baseline_seal(apps, None)
    log = entries(graph.project)
    assert {e.action for e in log} == {"baseline"} and len(log) == 3 + 1 + 4
    assert verify(graph)["verified"] is True


# --- the graph mutation matrix ------------------------------------------------------------------


def test_a_deleted_fact_is_named(graph):
    sql(f"DELETE FROM {TemporalFact._meta.db_table} WHERE id = %s", [graph.edge])
    report = verify(graph)
    assert report["verified"] is False
    assert named(report) == {("deleted", "fact", graph.edge)}
    assert report["mismatched_ids"] == [graph.edge]


def test_a_deleted_episode_is_named(graph):
    sql(f"DELETE FROM {EpisodeFile._meta.db_table} WHERE episode_id = %s", [graph.episode])
    links = Episode.entities.through._meta.db_table
    sql(f"DELETE FROM {links} WHERE episode_id = %s", [graph.episode])
    sql(f"DELETE FROM {Episode._meta.db_table} WHERE id = %s", [graph.episode])
    assert named(verify(graph)) == {("deleted", "episode", graph.episode)}


def test_a_fact_inserted_with_a_correct_hash_is_named(graph):
    forged = TemporalFact.objects.select_related(*record_canonical.FACT_RELATED).get(pk=graph.edge)
    forged.pk, forged.object_value = "fact_forged000000001", "stripe_api"
    forged.object_entity = None
    forged.save(force_insert=True)
    sql(
        f"UPDATE {TemporalFact._meta.db_table} SET sha256 = %s WHERE id = %s",
        [fact_sha(forged.pk), forged.pk],
    )
    report = verify(graph)
    assert report["mismatches"] == []  # its own hash is right
    assert named(report) == {("inserted", "fact", forged.pk)}


@pytest.mark.parametrize("kind", ["fact", "episode"])
def test_a_row_duplicated_under_a_new_id_is_named_as_a_copy(graph, kind):
    if kind == "fact":
        copy = TemporalFact.objects.select_related(*record_canonical.FACT_RELATED).get(
            pk=graph.edge
        )
        original, copy.pk = graph.edge, "fact_copy00000000001"
        copy.save(force_insert=True)
        copy.sha256 = fact_sha(copy.pk)
        TemporalFact.objects.filter(pk=copy.pk).update(sha256=copy.sha256)
    else:
        copy = Episode.objects.select_related("project").get(pk=graph.episode)
        original, copy.pk = graph.episode, "ep_copy0000000000001"
        copy.sha256 = episode_sha(copy)
        copy.save(force_insert=True)
        EpisodeFile.objects.bulk_create(
            [EpisodeFile(episode=copy, path=path) for path in copy.files_touched]
        )
        links = Episode.entities.through
        entities = Entity.objects.filter(project=graph.project, slug__in=copy.entities_mentioned)
        links.objects.bulk_create([links(episode_id=copy.pk, entity_id=e.pk) for e in entities])
    report = verify(graph)
    assert named(report) == {("duplicated", kind, copy.pk)}
    (problem,) = report["problems"]
    assert original in problem["reason"]


def test_a_fact_rewritten_with_its_hash_recomputed_is_named(graph):
    table = TemporalFact._meta.db_table
    sql(f"UPDATE {table} SET object_value = %s WHERE id = %s", ["JWT_NONE", graph.paseto])
    sql(f"UPDATE {table} SET sha256 = %s WHERE id = %s", [fact_sha(graph.paseto), graph.paseto])
    report = verify(graph)
    assert report["mismatches"] == []  # the row agrees with itself...
    assert named(report) == {("rewritten", "fact", graph.paseto)}  # ...not with the log
    assert report["mismatched_ids"] == [graph.paseto]


def test_an_episode_rewritten_with_its_hash_recomputed_is_named(graph):
    episode = Episode.objects.select_related("project").get(pk=graph.episode)
    episode.content = "Nothing leaked."
    Episode.objects.filter(pk=episode.pk).update(
        content=episode.content, sha256=episode_sha(episode)
    )
    assert named(verify(graph)) == {("rewritten", "episode", graph.episode)}


@pytest.mark.parametrize(
    ("column", "value"),
    [("kind", "library"), ("name", "Payments"), ("aliases", '["billing"]')],
)
def test_an_entity_column_edited_behind_the_applications_back_is_named(graph, column, value):
    sql(
        f"UPDATE {Entity._meta.db_table} SET {column} = %s WHERE project_id = %s AND slug = %s",
        [value, graph.project.pk, "auth_service"],
    )
    assert named(verify(graph)) == {("rewritten", "entity", "auth_service")}


def test_an_inserted_and_a_deleted_entity_are_named(graph):
    Entity.objects.create(project=graph.project, slug="rogue", name="rogue", created_at=_now())
    links = Episode.entities.through
    vault = Entity.objects.get(project=graph.project, slug="key_vault")
    links.objects.filter(entity_id=vault.pk).delete()
    sql(f"DELETE FROM {Entity._meta.db_table} WHERE id = %s", [vault.pk])
    assert named(verify(graph)) == {
        ("inserted", "entity", "rogue"),
        ("deleted", "entity", "key_vault"),
        ("index", "episode", graph.episode),  # it no longer links the entity it mentions
    }


def test_a_removed_episode_file_row_is_named(graph):
    sql(
        f"DELETE FROM {EpisodeFile._meta.db_table} WHERE episode_id = %s AND path = %s",
        [graph.episode, "src/auth/keys.py"],
    )
    report = verify(graph)
    assert named(report) == {("index", "episode", graph.episode)}
    assert "missing src/auth/keys.py" in report["problems"][0]["reason"]


def test_a_removed_entity_link_is_named(graph):
    vault = Entity.objects.get(project=graph.project, slug="key_vault")
    links = Episode.entities.through._meta.db_table
    sql(f"DELETE FROM {links} WHERE episode_id = %s AND entity_id = %s", [graph.episode, vault.pk])
    report = verify(graph)
    assert named(report) == {("index", "episode", graph.episode)}
    assert "entity links" in report["problems"][0]["reason"]


def test_a_lowered_revision_is_named(graph):
    # A cached index would never see the change it stamps.
    sql(f"UPDATE {TemporalFact._meta.db_table} SET revision = 0 WHERE id = %s", [graph.edge])
    assert named(verify(graph)) == {("revision", "fact", graph.edge)}


@pytest.mark.parametrize(
    "text",
    ["yesterday", "2025-02-30 00:00:00", "2025-01-01 00:00:00.000001", "2025-01-01T00:00:00"],
    ids=["not-a-time", "no-such-day", "a-microsecond-later", "another-spelling-same-instant"],
)
def test_a_timestamp_overwritten_with_text_is_named_not_a_crash(graph, text):
    if on_postgres():
        pytest.skip("PostgreSQL's timestamp columns hold only timestamps")
    table = TemporalFact._meta.db_table
    same_instant = text == "2025-01-01T00:00:00"  # when the JWT fact holds from
    fact = graph.jwt if same_instant else graph.edge
    sql(f"UPDATE {table} SET valid_from = %s WHERE id = %s", [text, fact])
    report = verify(graph)
    if same_instant:  # written another way, it is still the instant sealed
        assert report["problems"] == []
    else:
        assert named(report) == {("mismatch", "fact", fact)}


def test_a_change_entry_time_overwritten_is_named(graph):
    if on_postgres():
        pytest.skip("PostgreSQL's timestamp columns hold only timestamps")
    first = entries(graph.project)[0]
    with audit_maintenance():
        sql(
            f"UPDATE {GraphChange._meta.db_table} SET recorded_at = %s WHERE id = %s",
            ["1999-12-31 23:59:59.999999", first.pk],
        )
    assert named(verify(graph)) == {("chain", "change", str(first.seq))}


# --- breaks in the log itself -------------------------------------------------------------------


def test_an_edited_entry_is_named(graph):
    entry = entries(graph.project)[3]
    with audit_maintenance():
        GraphChange.objects.filter(pk=entry.pk).update(record_id="fact_other")
    report = verify(graph)
    assert ("chain", "change", str(entry.seq)) in named(report)


def test_a_deleted_middle_entry_is_a_gap(graph):
    entry = entries(graph.project)[4]
    with audit_maintenance():
        GraphChange.objects.filter(pk=entry.pk).delete()
    report = verify(graph)
    (gap,) = [p for p in report["problems"] if p["kind"] == "chain"]
    assert gap["id"] == str(entry.seq) and "missing" in gap["reason"]


def test_an_entry_rewritten_with_its_hash_recomputed_is_named_not_its_successor(graph):
    # The attacker rewrites the fact and the entry that sealed it, both rehashed.
    table = TemporalFact._meta.db_table
    sql(f"UPDATE {table} SET object_value = %s WHERE id = %s", ["JWT_NONE", graph.paseto])
    sql(f"UPDATE {table} SET sha256 = %s WHERE id = %s", [fact_sha(graph.paseto), graph.paseto])
    entry = next(e for e in entries(graph.project) if e.record_id == graph.paseto)
    entry.record_sha256 = fact_sha(graph.paseto)
    with audit_maintenance():
        GraphChange.objects.filter(pk=entry.pk).update(
            record_sha256=entry.record_sha256, hash=rehash(entry, graph.project)
        )
    report = verify(graph)
    assert named(report) == {("chain", "change", str(entry.seq))}
    assert graph.paseto in report["problems"][0]["reason"]


def test_a_truncated_tail_is_caught_by_the_head(graph):
    last = entries(graph.project)[-1]
    with audit_maintenance():
        GraphChange.objects.filter(pk=last.pk).delete()
    report = verify(graph)
    assert ("head", "change", str(last.seq)) in named(report)


def test_a_forged_append_is_caught_by_the_head(graph):
    last = entries(graph.project)[-1]
    forged = GraphChange(
        project=graph.project,
        seq=last.seq + 1,
        revision=last.revision,
        action="created",
        record_type="entity",
        record_id="ghost",
        record_sha256="0" * 64,
        erased_sha256="",
        note="",
        recorded_at=last.recorded_at,
        prev_hash=last.hash,
    )
    forged.hash = rehash(forged, graph.project)
    forged.save()
    assert ("head", "change", str(last.seq)) in named(verify(graph))


def _rechain_from(project: Project, start: int) -> None:
    """What an attacker with database access does after rewriting entry ``start``: every later
    entry linked and rehashed, and the head moved to the new end."""
    chain = entries(project)
    with audit_maintenance():
        for before, entry in zip(chain[start - 1 :], chain[start:], strict=False):
            entry.prev_hash = before.hash
            entry.hash = rehash(entry, project)
            GraphChange.objects.filter(pk=entry.pk).update(
                prev_hash=entry.prev_hash, hash=entry.hash
            )
    GraphRevision.objects.filter(project=project).update(
        changes=chain[-1].seq, head_hash=chain[-1].hash
    )


def test_a_full_rechain_passes_the_head_but_not_a_checkpoint(graph):
    size, head = _log_head(graph.project)
    table = TemporalFact._meta.db_table
    sql(f"UPDATE {table} SET object_value = %s WHERE id = %s", ["JWT_NONE", graph.paseto])
    sql(f"UPDATE {table} SET sha256 = %s WHERE id = %s", [fact_sha(graph.paseto), graph.paseto])
    entry = next(e for e in entries(graph.project) if e.record_id == graph.paseto)
    entry.record_sha256 = fact_sha(graph.paseto)
    with audit_maintenance():
        GraphChange.objects.filter(pk=entry.pk).update(
            record_sha256=entry.record_sha256, hash=rehash(entry, graph.project)
        )
    _rechain_from(graph.project, entry.seq)
    assert verify(graph)["verified"] is True  # without an anchor outside the database
    report = verify(graph, checkpoint_size=size, checkpoint_head=head)
    assert report["verified"] is False
    assert named(report) == {("checkpoint", "change", str(size))}
    assert report["checkpoint"] == {"size": size, "head": head, "consistent": False}


def test_wiping_the_graph_and_resetting_the_head_fails_against_a_checkpoint(graph):
    size, head = _log_head(graph.project)
    p = graph.project
    TemporalFact.objects.filter(project=p).update(superseded_by=None)
    TemporalFact.objects.filter(project=p).delete()
    EpisodeFile.objects.filter(episode__project=p).delete()
    Episode.entities.through.objects.filter(episode__project=p).delete()
    Episode.objects.filter(project=p).delete()
    Entity.objects.filter(project=p).delete()
    with audit_maintenance():
        GraphChange.objects.filter(project=p).delete()
    GraphRevision.objects.filter(project=p).update(changes=0, head_hash=GENESIS_HASH)
    assert verify(graph)["verified"] is True  # an empty graph, consistently empty
    report = verify(graph, checkpoint_size=size, checkpoint_head=head)
    assert named(report) == {("checkpoint", "change", str(size))}
    assert "fewer" in report["problems"][0]["reason"]


def test_a_checkpoint_stays_consistent_as_the_graph_grows(graph):
    size, head = _log_head(graph.project)
    fact_retract(project=graph.project, fact_id=graph.edge)
    report = verify(graph, checkpoint_size=size, checkpoint_head=head.upper())
    assert report["verified"] is True
    assert report["checkpoint"]["consistent"] is True
    assert report["chain"]["size"] == size + 1


def test_a_checkpoint_needs_both_its_size_and_its_head(graph):
    with pytest.raises(ApplicationError) as error:
        verify(graph, checkpoint_size=3)
    assert error.value.field == "checkpoint_head"


def test_rest_verifies_against_a_checkpoint_given_in_the_query(graph, api):
    size, head = _log_head(graph.project)
    query = {"checkpoint_size": size, "checkpoint_head": head}
    body = api.get("/v1/graph/integrity", query).json()
    assert body["verified"] is True and body["checkpoint"]["consistent"] is True
    assert body["chain"] == {"size": size, "head": head} and body["problems"] == []
    bad = api.get("/v1/graph/integrity", {**query, "checkpoint_head": "nope"})
    assert bad.status_code == 400 and "checkpoint_head" in bad.json()["fields"]


# --- erasure ------------------------------------------------------------------------------------


def test_erasure_removes_content_and_integrity_still_verifies(graph):
    episode_before = Episode.objects.get(pk=graph.episode).sha256
    erased = [
        *graph_record_erase(
            project=graph.project, record_type="fact", record_id=graph.paseto, reason="leak"
        ),
        *graph_record_erase(
            project=graph.project, record_type="episode", record_id=graph.episode, reason="leak"
        ),
        *graph_record_erase(
            project=graph.project, record_type="entity", record_id="auth_service", reason="gdpr"
        ),
    ]
    # The active fact was retracted first (its own entry): the tombstone keeps that last hash.
    closed = [e for e in entries(graph.project) if e.record_id == graph.paseto][-2]
    assert closed.action == "closed"
    fact_before = closed.record_sha256
    assert erased[:2] == [
        {"kind": "fact", "id": graph.paseto, "sha256": fact_before},
        {"kind": "episode", "id": graph.episode, "sha256": episode_before},
    ]
    fact = TemporalFact.objects.get(pk=graph.paseto)
    assert fact.object_value == ERASED_TEXT and fact.valid_until is not None
    episode = Episode.objects.get(pk=graph.episode)
    assert "PASETO" not in episode.title + episode.content and episode.files_touched == []
    assert not EpisodeFile.objects.filter(episode=episode).exists()
    assert not episode.entities.exists()
    entity = Entity.objects.get(project=graph.project, slug="auth_service")
    assert (entity.name, entity.aliases) == (ERASED_TEXT, [])
    report = verify(graph)
    assert report["verified"] is True, report["problems"]
    assert [(e["record_type"], e["id"], e["sha256"], e["reason"]) for e in report["erased"]] == [
        ("fact", graph.paseto, fact_before, "leak"),
        ("episode", graph.episode, episode_before, "leak"),
        ("entity", "auth_service", erased[2]["sha256"], "gdpr"),
    ]


def test_an_erased_record_is_still_sealed(graph):
    graph_record_erase(
        project=graph.project, record_type="episode", record_id=graph.episode, reason="leak"
    )
    sql(
        f"UPDATE {Episode._meta.db_table} SET content = %s WHERE id = %s",
        ["restored secret", graph.episode],
    )
    assert named(verify(graph)) == {("mismatch", "episode", graph.episode)}


def test_erasure_names_what_it_cannot_find_and_wants_a_reason(graph):
    with pytest.raises(NotFoundError) as missing:
        graph_record_erase(
            project=graph.project, record_type="fact", record_id="fact_nope", reason="x"
        )
    assert missing.value.field == "fact"
    with pytest.raises(ApplicationError) as no_reason:
        graph_record_erase(
            project=graph.project, record_type="fact", record_id=graph.edge, reason=" "
        )
    assert no_reason.value.field == "reason"


# --- the admin edits entities through the service -----------------------------------------------


@pytest.fixture
def admin_client(client):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("root", "", "pw-for-tests-only")
    client.force_login(user)
    return client


def test_an_entity_edited_in_the_admin_is_sealed(graph, admin_client):
    entity = Entity.objects.get(project=graph.project, slug="key_vault")
    url = f"/admin/graph_app/entity/{entity.pk}/change/"
    form = {"kind": "service", "name": "Key vault", "aliases": '["vault"]'}
    assert admin_client.post(url, form).status_code == 302
    last = entries(graph.project)[-1]
    assert (last.action, last.record_type, last.record_id) == ("changed", "entity", "key_vault")
    assert verify(graph)["verified"] is True
    bad = admin_client.post(url, {**form, "aliases": '"vault"'})
    assert bad.status_code == 200 and "aliases" in bad.content.decode()
    assert entries(graph.project)[-1].pk == last.pk


def test_the_admin_shows_the_change_log_read_only(graph, admin_client):
    assert admin_client.get("/admin/graph_app/graphchange/").status_code == 200
    entry = entries(graph.project)[0]
    page = admin_client.get(f"/admin/graph_app/graphchange/{entry.pk}/change/").content.decode()
    assert 'name="_save"' not in page
    assert admin_client.get("/admin/graph_app/graphchange/add/").status_code == 403
    assert admin_client.post(f"/admin/graph_app/graphchange/{entry.pk}/delete/").status_code == 403


def _now() -> Any:
    from memoryproject.timeutil import utcnow

    return utcnow()


def test_an_erased_edge_leaves_the_ego_graph_of_a_process_that_walked_it(default_project):
    p = default_project
    edge = fact_upsert(
        project=p,
        subject_id="billing",
        predicate="reports_to",
        object_value="ceo_office",
        object_entity="ceo_office",
    )["fact"]["id"]
    fact_upsert(project=p, subject_id="billing", predicate="owner", object_value="ana")

    def ego(entity):
        graph = entity_reads.entity_query(project=p, entity_id=entity)["ego_graph"]
        return {e["fact_id"] for e in graph["edges"]}, {n["id"] for n in graph["nodes"]}

    # The process keeps the project's edges in memory once it has walked them.
    assert ego("billing") == ({edge}, {"billing", "ceo_office"})
    graph_record_erase(project=p, record_type="fact", record_id=edge, reason="gdpr")
    # The erased relation is gone from both ends, without a restart.
    assert ego("billing") == (set(), {"billing"})
    assert ego("ceo_office") == (set(), {"ceo_office"})


def test_a_process_that_compiled_erased_records_never_delivers_them_again(graph):
    from graph_app.compiler import context_compile

    def compiled(**travel: Any) -> str:
        query = "PASETO token format of auth_service, keys in the vault"
        return context_compile(project=graph.project, query=query, max_tokens=800, **travel)[
            "markdown"
        ]

    # The index of this process holds both records once it has compiled them.
    assert "PASETO_v4_public" in compiled() and "PASETO v4 public keys" in compiled()
    for kind, record in (("fact", graph.paseto), ("episode", graph.episode)):
        graph_record_erase(project=graph.project, record_type=kind, record_id=record, reason="leak")
    for text in (
        compiled(),
        compiled(include_superseded=True),
        compiled(as_of="2025-07-01T00:00:00Z"),  # when the erased fact held
    ):
        assert "PASETO" not in text


@pytest.mark.parametrize(
    "column,twin", [("recorded_at", "valid_from"), ("closed_at", "valid_until")]
)
def test_an_instant_moved_apart_from_its_twin_is_named(graph, column, twin):
    """A fact is mostly recorded when it becomes valid and closed when it ends, and
    verification reads such equal instants once: moving one of the two by a microsecond is
    still named."""
    if column == "closed_at":
        fact_retract(project=graph.project, fact_id=graph.edge)
    assert verify(graph)["problems"] == []
    fact = TemporalFact.objects.get(id=graph.edge)
    assert getattr(fact, column) == getattr(fact, twin)
    later = getattr(fact, column) + timedelta(microseconds=1)
    TemporalFact.objects.filter(id=graph.edge).update(**{column: later})
    assert named(verify(graph)) == {("mismatch", "fact", graph.edge)}


def test_a_moved_time_among_the_entries_of_one_write_is_named(graph):
    """The entries one write appends share its time, and verification reads each stored time
    once: moving the second entry of a write by a microsecond is still named, and only it."""
    log = entries(graph.project)
    _, second = next((a, b) for a, b in itertools.pairwise(log) if a.recorded_at == b.recorded_at)
    with audit_maintenance():
        GraphChange.objects.filter(pk=second.pk).update(
            recorded_at=second.recorded_at + timedelta(microseconds=1)
        )
    assert named(verify(graph)) == {("chain", "change", str(second.seq))}
