"""manage.py injection_log_verify reports an intact chain, and names the break with exit 1."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from audit_app.models import InjectionLogHead, InjectionRecord, audit_maintenance
from sessions_app.plan import plan_context

pytestmark = pytest.mark.django_db


def test_an_intact_log_is_reported_as_verified(default_project):
    plan_context(project=default_project)
    plan_context(project=default_project, mode="dry_run")
    head = InjectionLogHead.objects.get()
    out = StringIO()
    call_command("injection_log_verify", stdout=out)
    assert out.getvalue() == (
        "injection log intact: 2 records verified\n"
        f"  anchor   genesis: seq 0 {'0' * 16}\n"
        f"  head     seq 2 {head.last_hash[:16]}\n"
        "  witness  verified\n"
    )


def test_a_tampered_record_exits_1_and_is_named_in_json(default_project):
    first = plan_context(project=default_project)
    plan_context(project=default_project)
    with audit_maintenance():
        InjectionRecord.objects.filter(pk=first["injection_id"]).update(status="injected")
    out = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("injection_log_verify", "--json", stdout=out)
    assert exit_info.value.code == 1
    result = json.loads(out.getvalue())
    assert result["ok"] is False
    assert result["first_broken"]["id"] == first["injection_id"]
