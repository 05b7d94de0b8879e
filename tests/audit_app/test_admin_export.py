"""Export of the filtered injection log (CSV and JSON): the rows of the selection only, each
carrying the log's head and the latest checkpoint, enough to recompute every record hash and
chain the rows to the head; spreadsheet formulas are defused in CSV."""

from __future__ import annotations

import csv
import io
import itertools
import json

import pytest
from django.contrib.auth import get_user_model

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.domain.chain import record_hash
from audit_app.injection_log import injection_log_append
from audit_app.models import AuditCheckpoint, InjectionLogHead
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

pytestmark = pytest.mark.django_db

LIST = "/admin/audit_app/injectionrecord/"
EXPORT = f"{LIST}export/"


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("auditor", "", "pw-for-tests-only")
    client.force_login(user)
    return client


def append(project: Project, n: int, **over) -> None:
    fields = {
        "project": project,
        "channel": "rest",
        "client": f"agent {n}",
        "status": "injected",
        "decision": "PASS",
        "trust_score": 0.9,
        "threshold": 0.75,
        "mode": "auto",
        "trace_ids": [],
        "system_prompt": f"text {n}",
        "generated_at": utcnow(),
        "source": "compile",
        "request": {"query": f"q{n}", "max_tokens": 400},
        "items": [{"kind": "fact", "id": f"fact_{n}", "sha256": "a" * 64}],
    }
    fields.update(over)
    injection_log_append(**fields)


def export(client, fmt: str, query: dict) -> bytes:
    """Opens the export page from the filtered list and submits it, every field selected."""
    page = client.get(EXPORT, query)
    assert page.status_code == 200
    form = page.context["form"]
    choice = next(value for value, label in form.fields["format"].choices if label == fmt)
    data = {"format": choice}
    data.update(
        {
            name: "on"
            for name, field in form.fields.items()
            if getattr(field, "is_selectable_field", False)
        }
    )
    if "resource" in form.fields:
        data["resource"] = form.fields["resource"].choices[0][0]
    response = client.post(f"{EXPORT}?{page.wsgi_request.GET.urlencode()}", data)
    assert response.status_code == 200, response.content[:500]
    assert response.has_header("Content-Disposition"), response.context["form"].errors
    assert "attachment" in response["Content-Disposition"]
    return response.content


@pytest.fixture
def log(settings):
    settings.AUDIT_CHECKPOINT_KEY = "k" * 40
    demo = Project.objects.get_or_create(slug="demo")[0]
    append(demo, 1)
    append(demo, 2, decision="ESCALATE", status="flagged", client='=HYPERLINK("http://x")')
    append(demo, 3, client="@SUM(A1:A9)")
    audit_checkpoint_create()
    append(demo, 4, client="+1", decision="ESCALATE", status="flagged")
    append(demo, 5, client="-2")
    return demo


def test_csv_export_carries_the_head_and_checkpoint_and_defuses_formulas(staff, log):
    body = export(staff, "csv", {"decision__exact": "ESCALATE"}).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(body)))
    head = InjectionLogHead.objects.get(pk=1)
    checkpoint = AuditCheckpoint.objects.get()
    assert [int(r["seq"]) for r in rows] == [4, 2]  # the filtered selection only
    assert {r["log_head_hash"] for r in rows} == {head.last_hash}
    assert {r["log_head_seq"] for r in rows} == {"5"}
    assert {r["checkpoint_head"] for r in rows} == {checkpoint.log_head}
    assert {r["checkpoint_hmac"] for r in rows} == {checkpoint.mac}
    assert [r["client"] for r in rows] == ["'+1", '\'=HYPERLINK("http://x")']


def test_json_export_lets_a_reader_recompute_every_record_hash(staff, log):
    rows = json.loads(export(staff, "json", {}))
    assert [int(r["seq"]) for r in rows] == [5, 4, 3, 2, 1]
    head = InjectionLogHead.objects.get(pk=1)
    assert rows[0]["record_hash"] == head.last_hash == rows[0]["log_head_hash"]
    for newer, older in itertools.pairwise(rows):
        assert newer["prev_hash"] == older["record_hash"]
    for row in rows:
        payload = {
            "seq": int(row["seq"]),
            "format": int(row["format"]),
            "project_id": int(row["project_id"]),
            "source": row["source"],
            "channel": row["channel"],
            "client": row["client"],
            "client_reported": row["client_reported"],
            "status": row["status"],
            "decision": row["decision"],
            "trust_score": float(row["trust_score"]),
            "threshold": float(row["threshold"]),
            "mode": row["mode"],
            "trace_ids": json.loads(row["trace_ids"]),
            "request": json.loads(row["request"]),
            "items": json.loads(row["items"]),
            "prompt_sha256": row["prompt_sha256"],
            "generated_at": row["generated_at"],
            "created_at": row["created_at"],
            "prev_hash": row["prev_hash"],
        }
        assert record_hash(payload) == row["record_hash"], row["seq"]
    # JSON keeps values exactly: nothing to strip before hashing.
    assert rows[1]["client"] == "+1"


def test_export_needs_the_export_permission(client, log):
    user = get_user_model().objects.create_user("viewer", password="pw-for-tests-only")
    user.is_staff = True
    user.save()
    from django.contrib.auth.models import Permission

    user.user_permissions.add(Permission.objects.get(codename="view_injectionrecord"))
    client.force_login(user)
    page = client.get(LIST).content.decode()
    assert "export_link" not in page
    assert client.get(EXPORT).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="export_injectionrecord"))
    page = client.get(LIST, {"decision__exact": "PASS"}).content.decode()
    assert f'href="{EXPORT}?decision__exact=PASS" class="export_link"' in page
