"""Retention: AUDIT_RETENTION_DAYS (default 183) below the legal six months fails
manage.py check; purge_audit_log removes only records older than the retention period, records
the purge in the chain, and what remains verifies from the purge's anchor."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.models import DeliveredText, InjectionRecord
from audit_app.retention import audit_log_purge
from audit_app.selectors import injection_log_verify
from memoryproject.errors import ApplicationError
from tests.audit_app import log_tampering as tamper
from tests.audit_app.log_tampering import run

pytestmark = pytest.mark.django_db

NOW = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(days=400)
CUTOFF = NOW - timedelta(days=200)


@pytest.fixture
def aged_log(default_project, settings):
    """Three records 400 days old (one text shared with a recent record), then two recent."""
    settings.AUDIT_CHECKPOINT_KEY = tamper.KEY
    with time_machine.travel(OLD, tick=False):
        tamper.append(default_project, 1)
        tamper.append(default_project, 2, system_prompt="still delivered")
        tamper.append(default_project, 3)
        audit_checkpoint_create()  # an old checkpoint: its head gets purged lawfully
    with time_machine.travel(NOW - timedelta(days=1), tick=False):
        tamper.append(default_project, 4, system_prompt="still delivered")
        tamper.append(default_project, 5)
    traveller = time_machine.travel(NOW, tick=False)
    traveller.start()
    yield
    traveller.stop()


def test_the_default_retention_passes_the_check(settings):
    settings.AUDIT_RETENTION_DAYS = 183
    call_command("check", stdout=StringIO())


def test_retention_below_six_months_fails_the_check(settings):
    settings.AUDIT_RETENTION_DAYS = 30
    with pytest.raises(SystemCheckError) as error:
        call_command("check", stdout=StringIO(), stderr=StringIO())
    assert "AUDIT_RETENTION_DAYS is 30" in str(error.value)
    assert "at least 183 days" in str(error.value)


def test_purge_refuses_records_younger_than_the_retention_period(aged_log, settings):
    young = (NOW - timedelta(days=100)).date().isoformat()
    code, _, err = run("purge_audit_log", "--before", young)
    assert code == 1
    assert "is within the retention period (183 days)" in err
    settings.AUDIT_RETENTION_DAYS = 365
    with pytest.raises(ApplicationError, match="retention period \\(365 days\\)"):
        audit_log_purge(before=CUTOFF)
    assert InjectionRecord.objects.count() == 5


def test_a_dry_run_changes_nothing(aged_log):
    code, out, _ = run("purge_audit_log", "--before", CUTOFF.date().isoformat(), "--dry-run")
    assert code == 0
    assert out.startswith("would purge 3 record(s)\n")
    assert "  records    3 (seq 1-3)\n" in out and "  texts      2\n" in out
    assert InjectionRecord.objects.count() == 5


def test_a_purge_removes_old_records_and_texts_and_the_rest_verifies(aged_log):
    shared = InjectionRecord.objects.get(seq=4).prompt_sha256
    third = InjectionRecord.objects.get(seq=3)
    code, out, _ = run("purge_audit_log", "--before", CUTOFF.date().isoformat(), "--json")
    assert code == 0
    result = json.loads(out)
    assert (result["records"], result["texts"], result["from_seq"], result["through_seq"]) == (
        3,
        2,
        1,
        3,
    )
    assert result["anchor"] == {"seq": 3, "hash": third.record_hash}
    assert list(InjectionRecord.objects.order_by("seq").values_list("seq", flat=True)) == [4, 5, 6]
    event = InjectionRecord.objects.get(seq=6)
    assert (event.source, event.request["through_hash"]) == ("purge", third.record_hash)
    assert DeliveredText.objects.filter(sha256=shared).exists()  # still used by seq 4
    assert DeliveredText.objects.count() == 2
    verification = injection_log_verify()
    assert verification.ok, verification.as_json()
    assert (verification.anchor.kind, verification.anchor.seq) == ("purge", 3)
    assert verification.checkpoints[0].consistent  # the old checkpoint's head was purged lawfully
    code, out, _ = run("injection_log_verify")
    assert code == 0 and "  anchor      purge event seq 6: seq 3 " in out


def test_nothing_to_purge_appends_nothing(aged_log):
    result = audit_log_purge(before=OLD - timedelta(days=1))
    assert (result.records, result.event_seq) == (0, None)
    assert InjectionRecord.objects.count() == 5


def test_a_second_purge_starts_from_the_first_ones_anchor(aged_log):
    audit_log_purge(before=CUTOFF)
    with time_machine.travel(NOW + timedelta(days=400), tick=False):
        result = audit_log_purge(before=NOW + timedelta(days=10))
        assert (result.from_seq, result.through_seq, result.records) == (4, 6, 3)
        assert injection_log_verify().ok


def test_a_broken_log_is_not_purged(aged_log):
    tamper.edit(2, status="edited")
    code, _, err = run("purge_audit_log", "--before", CUTOFF.date().isoformat())
    assert code == 1 and "does not verify" in err
    assert InjectionRecord.objects.count() == 5


def test_a_forged_purge_after_a_wipe_is_detected(aged_log):
    """Wiping recent records and claiming a purge: the purge event is not one the retention
    rules allow (its cutoff is too recent for its own date)."""
    last = InjectionRecord.objects.get(seq=5)
    audit_checkpoint_create()
    tamper.delete(1, 2, 3, 4, 5)
    fake = tamper.forged(
        6,
        last.record_hash,
        source="purge",
        request={
            "before": (NOW - timedelta(days=10)).isoformat(),
            "through_seq": 5,
            "through_hash": last.record_hash,
            "through_created_at": last.created_at.isoformat(),
        },
    )
    tamper.set_head(6, fake.record_hash)
    found = injection_log_verify().first_broken
    assert (found.id, found.seq, found.kind) == (fake.pk, 6, "anchor")
