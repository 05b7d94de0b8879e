"""Every context delivery is receipted in the same transaction as the answer: what was asked,
every source delivered with its content hash, and the SHA-256 of the exact text."""

import hashlib

import pytest
from django.db.models import ProtectedError

from audit_app.models import InjectionRecord
from audit_app.receipt_sources import ReceiptSource
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear
from sessions_app.models import Trace
from sessions_app.plan import plan_context
from sessions_app.selectors import trace_get, trace_sha256
from sessions_app.session_memory import session_load, session_save
from sessions_app.trace_writes import trace_record
from tests.sessions_app.factories import STRUCTURED_SUMMARY

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_compiler_cache():
    compiler_cache_clear()
    yield
    compiler_cache_clear()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def seed(project):
    fact_upsert(
        project=project,
        subject_id="auth_service",
        predicate="token_format",
        object_value="PASETO_v4_public",
    )
    episode_record(
        project=project,
        title="Move tokens to PASETO",
        category="adr",
        external_id="ADR-12",
        content="auth_service token format moved off shared HS256 secrets.",
        entities_mentioned=["auth_service"],
    )


def test_a_rest_compile_is_receipted_with_its_sources(api, default_project):
    seed(default_project)
    body = {"query": "auth_service token format", "max_tokens": 400}
    answer = api.post("/v1/graph/compile", body, format="json").json()
    record = InjectionRecord.objects.get(pk=answer["injection_id"])
    assert (record.source, record.channel, record.status) == ("compile", "rest", "injected")
    assert record.client and record.project_id == default_project.pk
    assert record.request["query"] == body["query"] and record.request["max_tokens"] == 400
    assert record.items == [
        {"kind": i["kind"], "id": i["id"], "sha256": i["sha256"]} for i in answer["items"]
    ]
    assert record.prompt_sha256 == sha(answer["markdown"])
    assert record.system_prompt == answer["markdown"]
    sources = ReceiptSource.objects.filter(record=record)
    assert {(s.kind, s.item_id) for s in sources} == {(i["kind"], i["id"]) for i in answer["items"]}


def test_a_refused_compile_writes_no_receipt(api, default_project):
    assert api.post("/v1/graph/compile", {"query": " "}, format="json").status_code == 400
    assert InjectionRecord.objects.count() == 0


def test_plan_and_load_receipts_name_their_sources_and_hashes(default_project):
    trace = trace_record(
        project=default_project,
        model="m",
        active_project="billing",
        last_decision="retry webhooks",
        current_output="billing/webhooks.py",
    )
    plan = plan_context(project=default_project, trust_threshold=0.0)
    record = InjectionRecord.objects.get(pk=plan["injection_id"])
    stored = trace_get(trace_id=trace["trace_id"], project_ids=None)
    assert record.items == [
        {"kind": "trace", "id": trace["trace_id"], "sha256": trace_sha256(stored)}
    ]
    assert record.request == {"n": 5, "trust_threshold": 0.0, "mode": "auto"}
    saved = session_save(project=default_project, summary=STRUCTURED_SUMMARY)
    loaded = session_load(project=default_project)
    receipt = InjectionRecord.objects.get(pk=loaded["injection_id"])
    assert receipt.items[0]["kind"] == "summary" and receipt.items[0]["id"] == saved["trace_id"]
    assert receipt.prompt_sha256 == sha(loaded["system_prompt"])


def test_receipted_evidence_cannot_be_deleted_through_the_orm(default_project):
    trace_record(project=default_project, model="m", active_project="x")
    plan_context(project=default_project, mode="force")
    with pytest.raises(ProtectedError):
        Trace.objects.filter(project=default_project).delete()
    with pytest.raises(ProtectedError):
        Trace.objects.get().delete()
    assert Trace.objects.count() == 1


def test_the_admin_offers_no_delete_of_receipted_evidence(admin_client, default_project):
    trace_record(project=default_project, model="m", active_project="x")
    plan_context(project=default_project, mode="force")
    trace = Trace.objects.get()
    url = f"/admin/sessions_app/trace/{trace.pk}/delete/"
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert Trace.objects.filter(pk=trace.pk).exists()


@pytest.mark.parametrize("link", ["trace", "summary", "fact", "episode"])
def test_a_source_is_looked_up_through_the_partial_index_of_its_link(default_project, link):
    """Each index row links one source, so each link column is indexed only where set (a
    receipt's commit writes one link index's pages, not four); the lookups by a source (the
    deletion check of PROTECT, erasure) must still find that index."""
    from django.db import connection

    lookup = ReceiptSource.objects.filter(**{f"{link}__in": [1, 2]}).only("pk")
    plan = lookup.explain()
    if connection.vendor == "sqlite":
        assert f"USING INDEX receipt_source_{link}" in plan or (
            f"USING COVERING INDEX receipt_source_{link}" in plan
        ), plan
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, ReceiptSource._meta.db_table)
    on_link = [n for n, i in indexes.items() if i["columns"] == [f"{link}_id"] and i["index"]]
    assert on_link == [f"receipt_source_{link}"]


@pytest.mark.django_db(transaction=True, available_apps=["audit_app", "sessions_app", "graph_app"])
@pytest.mark.parametrize("with_proofs", [False, True])
def test_a_delivery_takes_the_write_turn_for_its_receipt_only(with_proofs):
    """A compile reads outside any transaction; only its receipt is written in one. On SQLite
    a transaction holds the database's one write lock, and a compile held in one (seconds with
    proofs on a large graph) would make every writer wait."""
    from django.db import connection

    from graph_app.delivery import context_deliver
    from memoryproject.contracts import Caller
    from memoryproject.models import Project

    project, _ = Project.objects.get_or_create(slug="default")
    seed(project)
    compiler_cache_clear()
    statements: list[tuple[str, bool]] = []

    def record(execute, sql, params, many, context):
        verb = sql.split(None, 1)[0].upper()
        # Not a statement of the compile: the connection's sync level, set around a write turn
        # (memoryproject.writes), which reads and writes nothing.
        if verb != "PRAGMA":
            statements.append((verb, connection.in_atomic_block))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        answer = context_deliver(
            project=project,
            query="auth_service token format",
            with_proofs=with_proofs,
            caller=Caller(channel="test", client="turn"),
        )
    assert answer.injection_id is not None and answer.items
    assert all(atomic for _, atomic in statements[first_write(statements) :]), statements
    # The compile's reads come before any transaction (the proofs' graph leaves then read in
    # their own snapshot): a transaction opens with a BEGIN on SQLite, by the driver's on
    # PostgreSQL (its statements are then inside one).
    opened = next(i for i, (verb, atomic) in enumerate(statements) if verb == "BEGIN" or atomic)
    before = {verb for verb, _ in statements[:opened]}
    assert opened >= 2 and before == {"SELECT"}, statements
    assert InjectionRecord.objects.get(pk=answer.injection_id).items


def first_write(statements: list[tuple[str, bool]]) -> int:
    return next(i for i, (verb, _) in enumerate(statements) if verb == "INSERT")


def test_receipts_are_found_by_each_kind_of_source_through_an_index(default_project):
    """Auditors find the receipts that delivered a source by its id: a trace or a saved summary
    by its trace id, a fact or an episode by its id, and a source whose row was gone when it was
    delivered by the id the receipt names. Every lookup goes through an index (a receipt's
    commit no longer writes an index page per item id: linked rows are found by their link)."""
    from django.db import connection
    from django.utils import timezone

    from audit_app.injection_log import injection_log_append
    from audit_app.receipt_sources import receipts_delivering

    seed(default_project)
    trace = trace_record(
        project=default_project, model="m", active_project="auth", last_decision="PASETO"
    )
    plan = plan_context(project=default_project, trust_threshold=0.0)
    saved = session_save(project=default_project, summary=STRUCTURED_SUMMARY)
    loaded = session_load(project=default_project)
    compiled = graph_compile_delivered(default_project)
    gone = injection_log_append(
        project=default_project,
        channel="test",
        client="test",
        status="injected",
        decision="PASS",
        trust_score=1.0,
        threshold=0.5,
        mode="force",
        trace_ids=[],
        system_prompt="a fact deleted before it was receipted",
        generated_at=timezone.now(),
        source="compile",
        items=[{"kind": "fact", "id": "fact_gone", "sha256": "0" * 64}],
    )
    fact_id = next(i["id"] for i in compiled.items if i["kind"] == "fact")
    episode_id = next(i["id"] for i in compiled.items if i["kind"] == "episode")
    assert ReceiptSource.objects.filter(item_id="fact_gone", fact__isnull=True).exists()
    cases = {
        (trace["trace_id"], ("trace",)): {plan["injection_id"]},
        (saved["trace_id"], ("summary",)): {loaded["injection_id"]},
        (saved["trace_id"].upper(), ("trace", "summary")): {loaded["injection_id"]},
        (fact_id, ("fact",)): {compiled.pk},
        (episode_id, ("episode",)): {compiled.pk},
        ("fact_gone", ("fact",)): {gone.pk},
        ("fact_gone", ("episode",)): set(),
        ("nothing_delivered", ("trace", "summary", "fact", "episode")): set(),
    }
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, ReceiptSource._meta.db_table)
    by_id = sorted(n for n, i in indexes.items() if "item_id" in i["columns"] and i["index"])
    assert by_id == ["receipt_source_unlinked"]  # the linked rows' ids: no index to write
    for (item_id, kinds), expected in cases.items():
        found = InjectionRecord.objects.filter(receipts_delivering(item_id, kinds=kinds))
        assert set(found.values_list("pk", flat=True)) == expected, (item_id, kinds)
        if connection.vendor == "sqlite":
            plan_text = found.explain()
            assert "SCAN" not in plan_text.replace("TEMP B-TREE", ""), (item_id, plan_text)


def graph_compile_delivered(project):
    """A delivered compile of the seeded fact and episode: its receipt."""
    from graph_app.delivery import context_deliver
    from memoryproject.contracts import Caller

    result = context_deliver(
        project=project,
        query="auth_service token format PASETO",
        max_tokens=400,
        caller=Caller(channel="test", client="test"),
    )
    record = InjectionRecord.objects.get(pk=result.injection_id)
    assert {i["kind"] for i in record.items} == {"fact", "episode"}
    return record
