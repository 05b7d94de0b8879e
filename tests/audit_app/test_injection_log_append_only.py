"""The log tables are append-only at every level: raw SQL UPDATE and DELETE (and TRUNCATE on
PostgreSQL) are refused by triggers on SQLite and PostgreSQL, the ORM refuses save() of an
existing row, delete() and queryset update()/delete(), and the admin offers no add, change or
delete, superusers included. The head is the one row that moves, forward only."""

from __future__ import annotations

import pytest
from django.contrib.admin.sites import site
from django.db import IntegrityError, connection, transaction
from django.test import RequestFactory

from audit_app.admin import InjectionRecordAdmin
from audit_app.checkpoints import audit_checkpoint_create
from audit_app.injection_log import delivered_text_erase
from audit_app.models import (
    AuditCheckpoint,
    AuditMaintenanceGrant,
    DeliveredText,
    ErasedText,
    InjectionLogHead,
    InjectionRecord,
    audit_maintenance,
)
from memoryproject.append_only import AppendOnlyError, maintenance_open
from tests.audit_app import log_tampering as tamper
from tests.conftest import on_postgres

pytestmark = pytest.mark.django_db


@pytest.fixture
def log(default_project, settings):
    settings.AUDIT_CHECKPOINT_KEY = tamper.KEY
    records = tamper.build_log(default_project, 3)
    audit_checkpoint_create()
    return records


def refused(sql: str, params: list | None = None) -> str:
    """Runs ``sql``; answers the database's refusal (the statement must be refused)."""
    with pytest.raises(IntegrityError) as error, transaction.atomic(), connection.cursor() as c:
        c.execute(sql, params or [])
    return str(error.value)


STATEMENTS = [
    "UPDATE audit_app_injectionrecord SET status = 'edited' WHERE seq = 2",
    "DELETE FROM audit_app_injectionrecord WHERE seq = 3",
    "DELETE FROM audit_app_injectionrecord",
    "UPDATE audit_app_injectionloghead SET seq = 0",
    "DELETE FROM audit_app_injectionloghead",
    "UPDATE audit_app_deliveredtext SET text = 'edited'",
    "DELETE FROM audit_app_deliveredtext",
    "UPDATE audit_app_auditcheckpoint SET log_seq = 1",
    "DELETE FROM audit_app_auditcheckpoint",
]


@pytest.mark.parametrize("sql", STATEMENTS)
def test_raw_sql_updates_and_deletes_are_refused_by_triggers(log, sql):
    assert "is append-only" in refused(sql)


def test_raw_sql_on_tombstones_is_refused(log):
    delivered_text_erase(sha256=log[0].prompt_sha256, reason="test")
    assert "is append-only" in refused("UPDATE audit_app_erasedtext SET reason = 'x'")
    assert "is append-only" in refused("DELETE FROM audit_app_erasedtext")


@pytest.mark.skipif(not on_postgres(), reason="TRUNCATE triggers exist on PostgreSQL only")
@pytest.mark.parametrize(
    "table",
    [
        "audit_app_injectionrecord",
        "audit_app_injectionloghead",
        "audit_app_deliveredtext",
        "audit_app_auditcheckpoint",
        "audit_app_erasedtext",
    ],
)
def test_truncate_is_refused_on_postgres(log, table):
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending checks block TRUNCATE
    assert "is append-only" in refused(f"TRUNCATE {table} CASCADE")


def test_the_head_moves_forward_only_to_a_record_that_exists(log):
    head = InjectionLogHead.objects.get()
    assert "append-only" in refused(
        "UPDATE audit_app_injectionloghead SET seq = %s, last_hash = %s",
        [head.seq + 1, "f" * 64],
    )
    assert "append-only" in refused(
        "UPDATE audit_app_injectionloghead SET seq = %s, last_hash = %s",
        [head.seq - 1, log[1].record_hash],
    )
    tamper.append(log[0].project, 9)  # the service moves it forward: allowed
    assert InjectionLogHead.objects.get().seq == head.seq + 1


def test_a_stored_text_leaves_only_with_its_tombstone(log):
    digest = log[1].prompt_sha256
    assert "append-only" in refused(
        "DELETE FROM audit_app_deliveredtext WHERE sha256 = %s", [digest]
    )
    ErasedText.objects.create(sha256=digest, erased_at=log[1].created_at, reason="test")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_app_deliveredtext WHERE sha256 = %s", [digest])
    assert not DeliveredText.objects.filter(sha256=digest).exists()


def test_the_gate_is_closed_again_after_maintenance(log):
    with audit_maintenance():
        assert maintenance_open()
        InjectionRecord.objects.filter(seq=1).update(client="edited")
    assert not maintenance_open()
    assert "append-only" in refused("UPDATE audit_app_injectionrecord SET client = 'x'")


def test_the_gate_closes_with_a_rollback(log):
    with pytest.raises(RuntimeError), audit_maintenance():
        raise RuntimeError("maintenance failed")
    assert not maintenance_open()
    assert "append-only" in refused("DELETE FROM audit_app_injectionrecord")


# --- the ORM ----------------------------------------------------------------------------------


def test_the_orm_refuses_to_save_or_delete_an_existing_record(log):
    record = InjectionRecord.objects.get(seq=2)
    record.status = "edited"
    with pytest.raises(AppendOnlyError, match="InjectionRecord is append-only"):
        record.save()
    with pytest.raises(AppendOnlyError):
        record.delete()
    assert InjectionRecord.objects.get(seq=2).status == "injected"


def test_the_orm_refuses_queryset_update_delete_and_bulk_update(log):
    records = InjectionRecord.objects.all()
    with pytest.raises(AppendOnlyError):
        records.update(status="edited")
    with pytest.raises(AppendOnlyError):
        records.delete()
    with pytest.raises(AppendOnlyError):
        InjectionRecord.objects.bulk_update(list(records), ["status"])
    assert InjectionRecord.objects.count() == 3


@pytest.mark.parametrize("model", [DeliveredText, AuditCheckpoint, AuditMaintenanceGrant])
def test_the_orm_refuses_changes_to_every_log_table(log, model):
    if model is AuditMaintenanceGrant:  # a row left behind (the service removes its own)
        AuditMaintenanceGrant.objects.create(
            created_at=log[0].created_at, purpose="left", witness_n=0, body={}
        )
    row = model.objects.first()
    with pytest.raises(AppendOnlyError):
        row.save()
    with pytest.raises(AppendOnlyError):
        row.delete()
    with pytest.raises(AppendOnlyError):
        model.objects.all().delete()


def test_the_orm_head_moves_forward_only(log):
    head = InjectionLogHead.objects.get()
    head.seq -= 1
    with pytest.raises(AppendOnlyError):
        head.save()
    with pytest.raises(AppendOnlyError):
        InjectionLogHead.objects.get().delete()
    with pytest.raises(AppendOnlyError):
        InjectionLogHead.objects.update(seq=0)


# --- the admin --------------------------------------------------------------------------------


def test_the_admin_offers_no_delete_action_and_shows_the_receipt(log, admin_client, admin_user):
    request = RequestFactory().get("/admin/audit_app/injectionrecord/")
    request.user = admin_user
    model_admin = InjectionRecordAdmin(InjectionRecord, site)
    assert "delete_selected" not in model_admin.get_actions(request)
    page = admin_client.get(f"/admin/audit_app/injectionrecord/{log[0].pk}/change/")
    assert page.status_code == 200
    assert b"SESSION_CONTEXT: record 1" in page.content
    assert b"fact_1" in page.content
    delete = admin_client.post(f"/admin/audit_app/injectionrecord/{log[0].pk}/delete/")
    assert delete.status_code == 403
    assert admin_client.post("/admin/audit_app/injectionrecord/add/").status_code == 403
