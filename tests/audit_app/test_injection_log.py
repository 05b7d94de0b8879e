"""The injection log is append-only and hash-chained: each record links to the one before, and
verification names the first record that was altered or removed."""

import hashlib
from datetime import timedelta

import pytest
from django.contrib.admin.sites import site
from django.test import RequestFactory

from audit_app.admin import InjectionRecordAdmin
from audit_app.domain.chain import record_hash
from audit_app.injection_log import injection_log_append
from audit_app.models import DeliveredText, InjectionRecord, audit_maintenance, record_payload
from audit_app.selectors import injection_log_verify
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import utcnow

pytestmark = pytest.mark.django_db


def append(project, **overrides):
    fields = {
        "project": project,
        "channel": "rest",
        "client": "api_key:abc (agent)",
        "status": "injected",
        "decision": "PASS",
        "trust_score": 0.9,
        "threshold": 0.75,
        "mode": "auto",
        "trace_ids": ["t1", "t2"],
        "system_prompt": "SESSION_CONTEXT: ...",
        "generated_at": utcnow(),
    }
    fields.update(overrides)
    return injection_log_append(**fields)


def test_records_chain_by_seq_and_previous_hash(default_project):
    first = append(default_project)
    second = append(default_project, status="flagged", system_prompt="")
    assert (first.seq, second.seq) == (1, 2)
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.record_hash
    assert second.record_hash == record_hash(record_payload(second))
    assert second.prompt_sha256 == hashlib.sha256(b"").hexdigest()


def test_an_intact_log_verifies(default_project):
    records = [append(default_project) for _ in range(3)]
    result = injection_log_verify()
    assert (result["ok"], result["checked"], result["first_broken"]) == (True, 3, None)
    assert result["head"] == {"seq": 3, "hash": records[-1].record_hash}
    assert result["anchor"]["kind"] == "genesis"


# Tampering on purpose: the maintenance gate lets the edits through the append-only triggers.


def test_an_edited_record_is_named_as_the_first_break(default_project):
    records = [append(default_project) for _ in range(3)]
    with audit_maintenance():
        InjectionRecord.objects.filter(pk=records[1].pk).update(trust_score=0.99)
    result = injection_log_verify()
    assert result["ok"] is False
    assert result["first_broken"]["seq"] == 2
    assert "record_hash" in result["first_broken"]["reason"]


def test_an_edited_prompt_is_detected(default_project):
    record = append(default_project)
    with audit_maintenance():
        DeliveredText.objects.filter(sha256=record.prompt_sha256).update(text="something else")
    assert injection_log_verify()["first_broken"]["reason"] == (
        "system_prompt does not match prompt_sha256"
    )


def test_a_deleted_record_is_detected(default_project):
    records = [append(default_project) for _ in range(3)]
    with audit_maintenance():
        InjectionRecord.objects.filter(pk=records[1].pk).delete()
    result = injection_log_verify()
    assert result["first_broken"]["seq"] == 3
    assert result["first_broken"]["kind"] == "gap"
    assert "missing" in result["first_broken"]["reason"]


def test_bad_arguments_append_nothing(default_project):
    with pytest.raises(ApplicationError) as error:
        append(default_project, source="other")
    assert error.value.field == "source"
    with pytest.raises(ApplicationError):
        append(default_project, generated_at=utcnow().replace(tzinfo=None) + timedelta(0))
    assert InjectionRecord.objects.count() == 0


def test_the_admin_lists_records_but_cannot_add_change_or_delete(default_project, admin_user):
    append(default_project)
    request = RequestFactory().get("/admin/audit_app/injectionrecord/")
    request.user = admin_user
    model_admin = InjectionRecordAdmin(InjectionRecord, site)
    assert model_admin.has_view_permission(request)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_the_admin_changelist_page_renders(default_project, admin_client):
    append(default_project, client="api_key:zz (bot)")
    response = admin_client.get("/admin/audit_app/injectionrecord/")
    assert response.status_code == 200
    assert b"api_key:zz (bot)" in response.content
