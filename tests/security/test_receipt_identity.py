"""Receipts name the authenticated identity in ``client`` and keep the client's self-reported
name beside it (``client_reported``), inside the hash chain: records written before that field
existed still verify, and editing the field afterwards breaks the chain."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from audit_app.domain.chain import record_hash
from audit_app.models import InjectionRecord, record_payload
from audit_app.selectors import injection_log_verify
from memoryproject.models import Project
from tests.audit_app.log_tampering import append, edit

pytestmark = pytest.mark.django_db


@pytest.fixture
def project() -> Project:
    return Project.objects.get_or_create(slug="default")[0]


def test_records_without_a_self_reported_name_hash_as_before_the_field_existed(project):
    record = append(project, 1)
    payload = record_payload(record)
    assert payload["client_reported"] == ""
    before_the_field = {k: v for k, v in payload.items() if k != "client_reported"}
    assert record_hash(before_the_field) == record.record_hash
    # A format-1 record (older still) is unaffected too.
    assert record_hash({**before_the_field, "format": 1}) == record_hash({**payload, "format": 1})


def test_a_self_reported_name_is_hashed_and_editing_it_breaks_the_chain(project):
    append(project, 1)
    claimed = append(project, 2, client_reported="claude-code")
    append(project, 3)
    assert claimed.client_reported == "claude-code"
    assert injection_log_verify().ok is True

    edit(2, client_reported="someone-else")
    broken = injection_log_verify()
    assert broken.ok is False and broken.first_broken.seq == 2

    edit(2, client_reported="")
    assert injection_log_verify().ok is False  # cleared: the hash no longer matches either


def test_rest_receipts_name_the_key_and_auditors_see_both_fields(make_key):
    _, key = make_key(scope="admin", projects=["default"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    compiled = client.post("/v1/graph/compile", {"query": "anything"}, format="json").json()
    record = InjectionRecord.objects.get(pk=compiled["injection_id"])
    assert record.client == f"api_key:{key.partition('.')[0]} (test key)"
    assert record.client_reported == ""
    listed = client.get("/v1/audit/injections").json()["results"][0]
    assert (listed["client"], listed["client_reported"]) == (record.client, "")
