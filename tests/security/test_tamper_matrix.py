"""The tamper matrix: an attacker with write access to the database, every verifier's answer.

Each attack starts from the same committed baseline (receipts and graph writes, each head
witnessed after its commit; a checkpoint; more receipts after it) and is made over the
attacker's own connection to the database file or server, with raw SQL, never through the
services:

- SQLite: a ``sqlite3`` connection of its own. Without the service's gate function its UPDATE
  or DELETE on an append-only table fails; the stronger attacker defines that function itself.
- PostgreSQL: a psycopg connection of its own. ``SET app.audit_maintenance`` opens nothing; the
  stronger attacker inserts a maintenance grant row for its transaction (it cannot sign it).

Every verifier must then say "not verified": the command (exit 1), REST ``/v1/audit/verify``,
the MCP twin, the console banner, the dashboard, and for the graph ``/v1/graph/integrity`` and
its MCP tool, with the witness's reason. Without a witness they say "unanchored", never green.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.models import InjectionRecord
from graph_app import integrity
from graph_app.fact_writes import fact_upsert
from graph_app.models import GraphChange, GraphRevision, TemporalFact
from memoryproject.models import Project
from memoryproject.services import api_key_create
from tests.audit_app import log_tampering as tamper
from tests.audit_app.log_tampering import run
from tests.conftest import on_postgres
from tests.graph_app.test_change_log import fact_sha, rehash

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


# --- the attacker's own connection ------------------------------------------------------------


def _attacker_connection() -> Any:
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return sqlite3.connect(settings["NAME"], isolation_level=None, timeout=20)
    return psycopg.connect(
        dbname=settings["NAME"],
        user=settings.get("USER") or "postgres",
        host=settings.get("HOST") or "127.0.0.1",
        port=settings.get("PORT") or 5432,
        autocommit=True,
    )


@contextmanager
def attacker(*, opens_gate: bool = True) -> Iterator[Any]:
    """A transaction on the attacker's connection. ``opens_gate``: the strongest attacker, who
    defines the gate function (SQLite) or inserts an unsigned grant row (PostgreSQL)."""
    connection.close()  # ours holds nothing while the attacker writes
    raw = _attacker_connection()
    try:
        cursor = raw.cursor()
        if opens_gate and on_postgres():
            cursor.execute("BEGIN")
            cursor.execute(
                "INSERT INTO audit_app_auditmaintenancegrant "
                "(created_at, purpose, txid, witness_n, body) "
                "VALUES (now(), 'forged', txid_current(), 1, '{}')"
            )
        else:
            if opens_gate:
                raw.create_function("memoryproject_gate_open", 0, lambda: 1)
            cursor.execute("BEGIN")
        yield cursor
        cursor.execute("COMMIT")
    finally:
        raw.close()


def _marks(n: int) -> str:
    return ", ".join(["%s" if on_postgres() else "?"] * n)


def q(sql: str) -> str:
    """Our %s placeholders in the attacker's dialect."""
    return sql if on_postgres() else sql.replace("%s", "?")


# --- the baseline -----------------------------------------------------------------------------


@dataclass
class Baseline:
    project: Project
    fact: str
    receipts: list[InjectionRecord]
    key: str


@pytest.fixture
def baseline(settings) -> Baseline:
    settings.AUDIT_CHECKPOINT_KEY = ""  # the witness alone signs checkpoints here
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    fact = fact_upsert(
        project=project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
    )["fact"]["id"]
    fact_upsert(
        project=project, subject_id="auth_service", predicate="owner", object_value="team-auth"
    )
    receipts = tamper.build_log(project, 6)
    audit_checkpoint_create()
    receipts += [tamper.append(project, n) for n in range(7, 10)]
    _, key = api_key_create(name="auditor", project_slugs=["default"], scope="admin")
    return Baseline(project, fact, receipts, key)


def _admin_client() -> Client:
    user = User.objects.filter(username="root").first() or User.objects.create_superuser(
        "root", "root@example.com", "pw"
    )
    client = Client()
    client.force_login(user)
    return client


def verdicts(base: Baseline) -> dict[str, Any]:
    """What every door answers now (True: verified)."""
    code, out, _ = run("injection_log_verify", "--json")
    command = json.loads(out)
    rest = APIClient()
    rest.credentials(HTTP_AUTHORIZATION=f"Bearer {base.key}")
    answer = rest.get("/v1/audit/verify")
    assert answer.status_code == 200, answer.content
    audit = answer.json()
    answer = rest.get("/v1/graph/integrity", {"project": "default"})
    assert answer.status_code == 200, answer.content
    graph = answer.json()
    console = _admin_client()
    banner = console.get("/admin/audit_app/injectionrecord/").content.decode()
    dashboard = console.get("/console/dashboard/chain/").content.decode()
    return {
        "command": code == 0 and command["ok"] is True,
        "command_reasons": json.dumps(command.get("witness")),
        "rest": audit["verified"] is True,
        "rest_body": json.dumps(audit),
        "banner": 'data-verified="true"' in banner,
        "banner_html": banner,
        "dashboard": 'data-verified="true"' in dashboard,
        "dashboard_html": dashboard,
        "graph": graph["verified"] is True,
        "graph_body": json.dumps(graph),
    }


LOG_DOORS = ("command", "rest", "banner", "dashboard")


def test_the_baseline_verifies_at_every_door(baseline):
    found = verdicts(baseline)
    assert all(found[door] for door in (*LOG_DOORS, "graph")), found
    assert 'data-witness="verified"' in found["banner_html"]


# --- attacks on the injection log -------------------------------------------------------------


def delete_every_checkpoint_row(base: Baseline) -> str:
    with attacker() as cursor:
        cursor.execute("DELETE FROM audit_app_auditcheckpoint")
    return "checkpoint rows are missing"


def truncate_the_tail(base: Baseline) -> str:
    """The 3 newest receipts deleted and the head moved back to the 6th."""
    sixth = base.receipts[5]
    with attacker() as cursor:
        seqs = [7, 8, 9]
        cursor.execute(
            q(
                "DELETE FROM audit_app_receiptsource WHERE record_id IN "
                f"(SELECT id FROM audit_app_injectionrecord WHERE seq IN ({_marks(3)}))"
            ),
            seqs,
        )
        cursor.execute(q(f"DELETE FROM audit_app_injectionrecord WHERE seq IN ({_marks(3)})"), seqs)
        cursor.execute(
            q("UPDATE audit_app_injectionloghead SET seq = %s, last_hash = %s WHERE id = 1"),
            [6, sixth.record_hash],
        )
    return "shorter than witnessed"


def delete_checkpoints_and_truncate(base: Baseline) -> str:
    delete_every_checkpoint_row(base)
    return truncate_the_tail(base)


def rewrite_a_receipt_and_rechain(base: Baseline) -> str:
    """A receipt's client changed, its hash and every later link recomputed, the head moved."""
    records = list(InjectionRecord.objects.order_by("seq"))
    from audit_app.domain.chain import record_hash
    from audit_app.models import record_payload

    previous = records[2].prev_hash
    updates = []
    for record in records[2:]:
        if record.seq == 3:
            record.client = "rewritten"
        record.prev_hash = previous
        record.record_hash = record_hash(record_payload(record))
        previous = record.record_hash
        updates.append((record.client, record.prev_hash, record.record_hash, record.pk))
    with attacker() as cursor:
        for client, prev_hash, digest, pk in updates:
            cursor.execute(
                q(
                    "UPDATE audit_app_injectionrecord SET client = %s, prev_hash = %s, "
                    "record_hash = %s WHERE id = %s"
                ),
                [client, prev_hash, digest, pk],
            )
        cursor.execute(
            q("UPDATE audit_app_injectionloghead SET last_hash = %s WHERE id = 1"), [previous]
        )
    return "does not have the hash the witness holds"


def delete_a_receipt_through_a_forged_gate(base: Baseline) -> str:
    """The gate opened by the attacker (its own function on SQLite, an unsigned grant row on
    PostgreSQL), the 2nd receipt deleted; the grant row is left behind on PostgreSQL."""
    with attacker() as cursor:
        cursor.execute(
            q(
                "DELETE FROM audit_app_receiptsource WHERE record_id IN "
                "(SELECT id FROM audit_app_injectionrecord WHERE seq = %s)"
            ),
            [2],
        )
        cursor.execute(q("DELETE FROM audit_app_injectionrecord WHERE seq = %s"), [2])
    return "seq 2" if not on_postgres() else "not one the witness signed"


LOG_ATTACKS = [
    delete_every_checkpoint_row,
    truncate_the_tail,
    delete_checkpoints_and_truncate,
    rewrite_a_receipt_and_rechain,
    delete_a_receipt_through_a_forged_gate,
]


@pytest.mark.parametrize("attack", LOG_ATTACKS, ids=lambda a: a.__name__)
def test_every_log_verifier_fails_closed_after_the_attack(baseline, attack):
    reason = attack(baseline)
    found = verdicts(baseline)
    assert not any(found[door] for door in LOG_DOORS), {d: found[d] for d in LOG_DOORS}
    # The command, REST and the banner name what happened.
    for body in (found["command_reasons"] + found["rest_body"], found["banner_html"]):
        assert reason in body or "BROKEN" in body or "broken" in body, (reason, body[:2000])


# --- the gate cannot be opened by a value -----------------------------------------------------


def test_the_gate_does_not_open_by_sql_alone(baseline):
    with (
        pytest.raises((sqlite3.DatabaseError, psycopg.Error)) as refused,
        attacker(opens_gate=False) as cursor,
    ):
        if on_postgres():
            cursor.execute("SET app.audit_maintenance = 'on'")
        cursor.execute(q("DELETE FROM audit_app_injectionrecord WHERE seq = %s"), [9])
    assert "append-only" in str(refused.value) or "memoryproject_gate_open" in str(refused.value)
    assert InjectionRecord.objects.filter(seq=9).exists()
    assert verdicts(baseline)["command"] is True


def test_a_forged_grant_row_is_reported_even_when_nothing_else_changed(baseline):
    if not on_postgres():
        pytest.skip("grant rows open the gate on PostgreSQL; SQLite asks the service's function")
    with attacker() as cursor:
        cursor.execute("SELECT 1")
    found = verdicts(baseline)
    assert not found["command"] and not found["rest"]
    assert "not one the witness signed" in found["command_reasons"]


# --- attacks on the graph ---------------------------------------------------------------------


def rewrite_the_graph_consistently(base: Baseline) -> None:
    """A fact's value changed, its row hash, its change-log entry, every later entry and the
    head recomputed: the graph agrees with itself."""
    table = TemporalFact._meta.db_table
    with attacker() as cursor:
        cursor.execute(
            q(f"UPDATE {table} SET object_value = %s WHERE id = %s"), ["JWT_NONE", base.fact]
        )
    digest = fact_sha(base.fact)
    chain = list(GraphChange.objects.filter(project=base.project).order_by("seq"))
    start = next(i for i, e in enumerate(chain) if e.record_id == base.fact)
    chain[start].record_sha256 = digest
    for i in range(start, len(chain)):
        if i > 0:
            chain[i].prev_hash = chain[i - 1].hash
        chain[i].hash = rehash(chain[i], base.project)
    with attacker() as cursor:
        cursor.execute(q(f"UPDATE {table} SET sha256 = %s WHERE id = %s"), [digest, base.fact])
        for entry in chain[start:]:
            cursor.execute(
                q(
                    "UPDATE graph_app_graphchange SET record_sha256 = %s, prev_hash = %s, "
                    "hash = %s WHERE id = %s"
                ),
                [entry.record_sha256, entry.prev_hash, entry.hash, entry.pk],
            )
        cursor.execute(
            q(f"UPDATE {GraphRevision._meta.db_table} SET head_hash = %s WHERE project_id = %s"),
            [chain[-1].hash, base.project.pk],
        )


def test_a_consistent_graph_rewrite_fails_integrity(baseline):
    rewrite_the_graph_consistently(baseline)
    # Against itself, the rewritten graph is whole: only the witness knows better.
    itself = integrity.integrity_unwitnessed(project=baseline.project)
    assert itself.verified is True
    found = verdicts(baseline)
    assert found["graph"] is False
    assert "does not have the hash the witness holds" in found["graph_body"]


def test_a_consistent_graph_rewrite_fails_with_the_checkpoint_rows_gone(baseline):
    delete_every_checkpoint_row(baseline)
    rewrite_the_graph_consistently(baseline)
    found = verdicts(baseline)
    assert found["graph"] is False and found["rest"] is False


# --- without a witness ------------------------------------------------------------------------


def test_without_a_witness_every_verifier_says_unanchored(baseline, settings):
    settings.WITNESS_DIR = ""
    found = verdicts(baseline)
    assert not any(found[door] for door in (*LOG_DOORS, "graph")), found
    assert "unanchored" in found["command_reasons"]
    assert 'data-witness="unanchored"' in found["banner_html"]
    assert "UNANCHORED" in found["dashboard_html"]
    assert '"state": "unanchored"' in found["graph_body"]


@pytest.fixture
def restored_triggers() -> Iterator[list[str]]:
    """Definitions of the triggers a test drops, made again afterwards (the flush between
    transactional tests empties tables, it does not rebuild their triggers)."""
    saved: list[str] = []
    yield saved
    connection.close()
    raw = _attacker_connection()
    try:
        cursor = raw.cursor()
        for definition in saved:
            cursor.execute(definition)
    finally:
        raw.close()


@pytest.mark.parametrize("table", ["audit_app_injectionrecord", "graph_app_graphchange"])
def test_dropped_append_only_triggers_are_not_verified(baseline, table, restored_triggers):
    with attacker(opens_gate=False) as cursor:
        if on_postgres():
            cursor.execute(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                "WHERE NOT tgisinternal AND tgrelid = %s::regclass",
                [table],
            )
        else:
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?",
                [table],
            )
        found = cursor.fetchall()
        for name, definition in found:
            restored_triggers.append(definition)
            cursor.execute(f"DROP TRIGGER {name}" + (f" ON {table}" if on_postgres() else ""))
    assert found
    found = verdicts(baseline)
    assert not any(found[door] for door in LOG_DOORS), {d: found[d] for d in LOG_DOORS}
    assert "append-only triggers are missing" in found["command_reasons"] + found["rest_body"]


# --- the MCP doors ----------------------------------------------------------------------------


def test_the_mcp_verifiers_fail_closed_too(baseline, tmp_path):
    """memory_verify_audit and memory_verify_integrity over a real MCP client (streamable
    HTTP, the auditor's key): green on the baseline, not verified after the attacks."""
    from tests.mcp.conftest import start_http_server, stop_http_server, structured

    async def verify(session: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        audit = await session.call_tool("memory_verify_audit", {})
        graph = await session.call_tool("memory_verify_integrity", {"project": "default"})
        return structured(audit), structured(graph)

    server = start_http_server(tmp_path)
    try:
        audit, graph = server.run(verify, key=baseline.key)
        assert audit["verified"] is True and graph["verified"] is True
        truncate_the_tail(baseline)
        rewrite_the_graph_consistently(baseline)
        audit, graph = server.run(verify, key=baseline.key)
    finally:
        stop_http_server(server)
        connection.close()
    assert audit["verified"] is False and audit["log"]["ok"] is False
    assert "shorter than witnessed" in json.dumps(audit)
    assert graph["verified"] is False
    assert "does not have the hash the witness holds" in json.dumps(graph)
