"""A receipt names what was asked and what was delivered (both hashed into the chain); the
exact text is kept once, apart, under its SHA-256, so it can be erased with a tombstone while
every record still verifies. Erasure and purge events are records of the same chain."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
import rfc8785

from audit_app.domain.chain import HASHED_FIELDS_V1, record_hash
from audit_app.injection_log import audit_event_append, delivered_text_erase
from audit_app.models import (
    DeliveredText,
    ErasedText,
    InjectionRecord,
    audit_maintenance,
    record_payload,
)
from audit_app.selectors import TEXT_MISSING, injection_log_verify
from memoryproject.errors import ApplicationError
from tests.audit_app import log_tampering as tamper

pytestmark = pytest.mark.django_db


def test_a_receipt_keeps_request_items_and_the_text_apart(default_project):
    asked = datetime(2026, 4, 20, 9, 30, tzinfo=UTC)
    record = tamper.append(
        default_project,
        1,
        source="compile",
        request={"query": "deploy", "max_tokens": 800, "as_of": asked, "threshold": 0.75},
    )
    stored = InjectionRecord.objects.get(pk=record.pk)
    assert stored.request == {
        "query": "deploy",
        "max_tokens": 800,
        "as_of": "2026-04-20T09:30:00Z",
        "threshold": 0.75,
    }
    assert stored.items == [{"kind": "fact", "id": "fact_1", "sha256": "1" * 64}]
    assert stored.system_prompt == "SESSION_CONTEXT: record 1"
    text = DeliveredText.objects.get()
    assert text.sha256 == stored.prompt_sha256 == hashlib.sha256(text.text.encode()).hexdigest()
    assert injection_log_verify().ok


def test_the_same_text_is_stored_once(default_project):
    for n in range(3):
        tamper.append(default_project, n, system_prompt="the same context")
    assert DeliveredText.objects.count() == 1
    assert {r.system_prompt for r in InjectionRecord.objects.all()} == {"the same context"}


def test_an_empty_text_is_not_stored(default_project):
    record = tamper.append(default_project, 1, system_prompt="", status="flagged")
    assert DeliveredText.objects.count() == 0
    assert InjectionRecord.objects.get(pk=record.pk).system_prompt == ""
    assert injection_log_verify().ok


@pytest.mark.parametrize("source", ["plan", "load", "compile", "prompt"])
def test_every_delivery_source_is_accepted(default_project, source):
    assert tamper.append(default_project, 1, source=source).source == source


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"source": "purge"}, "source"),
        ({"request": ["not", "an", "object"]}, "request"),
        ({"request": {"x": float("nan")}}, "request"),
        ({"request": {"query": "a\x00b"}}, "request"),
        ({"items": [{"kind": "trace", "id": "t1"}]}, "items"),
        ({"items": [{"kind": "secret", "id": "t1", "sha256": "a" * 64}]}, "items"),
        ({"items": [{"kind": "trace", "id": "t1", "sha256": "not-a-hash"}]}, "items"),
    ],
)
def test_a_malformed_receipt_appends_nothing(default_project, overrides, field):
    with pytest.raises(ApplicationError) as error:
        tamper.append(default_project, 1, **overrides)
    assert error.value.field == field
    assert InjectionRecord.objects.count() == 0


def test_events_are_records_of_the_same_chain(default_project):
    receipt = tamper.append(default_project, 1)
    event = audit_event_append(
        kind="erasure",
        project=default_project,
        details={"what": "trace", "id": "t1", "sha256": "b" * 64, "reason": "leaked token"},
        client="erase",
    )
    assert (event.seq, event.prev_hash) == (2, receipt.record_hash)
    assert (event.source, event.status, event.mode, event.decision) == (
        "erasure",
        "recorded",
        "event",
        "",
    )
    assert event.request["reason"] == "leaked token"
    assert (event.trace_ids, event.items, event.system_prompt) == ([], [], "")
    assert audit_event_append(kind="erasure", project=None, details={}).project_id is None
    with pytest.raises(ApplicationError):
        audit_event_append(kind="plan", project=default_project, details={})
    with pytest.raises(ApplicationError) as error:
        audit_event_append(kind="purge", project=None, details={"records": 3})
    assert error.value.field == "details"
    assert injection_log_verify().ok


def test_an_erased_text_leaves_a_tombstone_and_the_log_verifies(default_project):
    records = [tamper.append(default_project, n) for n in range(3)]
    digest = records[1].prompt_sha256
    assert delivered_text_erase(sha256=digest, reason="a ghp_ token in a trace") is True
    assert not DeliveredText.objects.filter(sha256=digest).exists()
    tombstone = ErasedText.objects.get(sha256=digest)
    assert tombstone.reason == "a ghp_ token in a trace"
    assert InjectionRecord.objects.get(pk=records[1].pk).system_prompt == ""
    assert injection_log_verify().ok
    assert delivered_text_erase(sha256=digest) is False  # nothing left to erase


def test_an_erased_text_is_not_stored_again(default_project):
    first = tamper.append(default_project, 1, system_prompt="secret ghp_123")
    delivered_text_erase(sha256=first.prompt_sha256, reason="token")
    again = tamper.append(default_project, 2, system_prompt="secret ghp_123")
    assert again.system_prompt == ""
    assert not DeliveredText.objects.exists()
    assert injection_log_verify().ok


def test_erasure_takes_a_sha256(default_project):
    with pytest.raises(ApplicationError) as error:
        delivered_text_erase(sha256="abc")
    assert error.value.field == "sha256"


def test_a_text_removed_without_erasure_is_named(default_project):
    records = [tamper.append(default_project, n) for n in range(1, 4)]
    with audit_maintenance():
        DeliveredText.objects.filter(sha256=records[1].prompt_sha256).delete()
    found = injection_log_verify().first_broken
    assert (found.id, found.seq, found.kind, found.reason) == (
        records[1].pk,
        2,
        "text",
        TEXT_MISSING,
    )


def test_records_written_before_receipts_keep_their_format_1_hash(default_project):
    """Format 1 records (from before request and items existed) hash the fields they had."""
    record = tamper.append(default_project, 1)
    payload = {**record_payload(record), "format": 1}
    old_fields = {name: payload[name] for name in HASHED_FIELDS_V1}
    expected = hashlib.sha256(rfc8785.dumps(old_fields)).hexdigest()
    assert record_hash(payload) == expected
    assert record_hash({**payload, "request": {"changed": True}}) == expected
    assert record_hash({**payload, "format": 2}) != expected
