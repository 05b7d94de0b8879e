"""The contradiction auditor over stored facts: runs and findings are kept, bundles mark the
conflict, dismissals hold until the facts change, auto-resolve keeps history, and the cron
command answers 0 / 1 / 2."""

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit_app.findings import contradictions_audit, finding_settle
from audit_app.models import AuditRun, ContradictionFinding
from graph_app import entity_reads, integrity
from graph_app.compiler import context_compile
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear
from graph_app.models import TemporalFact

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_compiler_cache():
    compiler_cache_clear()
    yield
    compiler_cache_clear()


def fact(project, subject, predicate, value, valid_from, **kw):
    return fact_upsert(
        project=project,
        subject_id=subject,
        predicate=predicate,
        object_value=value,
        valid_from=valid_from,
        **kw,
    )["fact"]


@pytest.fixture
def conflicting(default_project):
    old = fact(
        default_project, "auth_service", "uses_token_format", "JWT_HS256", "2026-01-10T00:00:00Z"
    )
    new = fact(
        default_project, "auth_service", "token_format", "PASETO_v4_public", "2026-04-20T00:00:00Z"
    )
    return old, new


def test_a_conflict_is_found_stored_and_explained(default_project, conflicting):
    old, new = conflicting
    result = contradictions_audit(project=default_project, channel="cli", client="cron")
    [finding] = result["findings"]
    assert finding["rule"] == "alias" and finding["fact_ids"] == [old["id"], new["id"]]
    assert finding["resolvable"] and "retire" in finding["suggestion"]
    assert result["open"] == 1 and result["facts_checked"] == 2
    run = AuditRun.objects.get(pk=result["run_id"])
    assert (run.findings, run.channel, run.client) == (1, "cli", "cron")
    assert ContradictionFinding.objects.get().state == "open"


def test_compiled_bundles_mark_a_fact_with_an_open_finding(default_project, conflicting):
    old, _ = conflicting
    finding_id = contradictions_audit(project=default_project)["findings"][0]["id"]
    bundle = context_compile(project=default_project, query="auth_service token format")
    assert f"[FACT:{old['id']}] [CONFLICT:#{finding_id}]" in bundle["markdown"]
    marked = {i["id"]: i.get("open_finding") for i in bundle["items"]}
    assert marked[old["id"]] == finding_id


def test_a_bundle_of_episodes_alone_does_not_ask_for_findings(default_project, conflicting):
    """Only facts are marked with an open finding: a compile that ranks none reads no finding,
    one that ranks a fact reads them once."""
    contradictions_audit(project=default_project)
    episode_record(
        project=default_project,
        title="Standup notes",
        category="incident",
        content="the rollout of the billing dashboard slipped to thursday",
    )
    table = ContradictionFinding._meta.db_table

    def findings_read(query: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            context_compile(project=default_project, query=query)
        return sum(table in q["sql"] for q in captured.captured_queries)

    assert findings_read("billing dashboard rollout thursday") == 0
    assert findings_read("auth_service token format") == 1


def test_a_clean_graph_has_no_findings(default_project):
    fact(default_project, "auth_service", "token_format", "PASETO", "2026-01-10T00:00:00Z")
    fact(default_project, "billing", "token_format", "JWT", "2026-01-10T00:00:00Z")
    assert contradictions_audit(project=default_project)["findings"] == []


def test_a_dismissed_finding_stays_quiet_until_its_facts_change(default_project, conflicting):
    first = contradictions_audit(project=default_project)
    finding = ContradictionFinding.objects.get(pk=first["findings"][0]["id"])
    with pytest.raises(Exception, match="reason"):
        finding_settle(finding=finding, state="dismissed", by="alice", reason=" ")
    finding_settle(finding=finding, state="dismissed", by="alice", reason="aliases on purpose")
    assert contradictions_audit(project=default_project)["findings"] == []
    bundle = context_compile(project=default_project, query="auth_service token format")
    assert "[CONFLICT:" not in bundle["markdown"]
    # A new value of one side changes the facts: the conflict is reported again.
    fact(default_project, "auth_service", "token_format", "PASETO_v4_local", "2026-05-01T00:00:00Z")
    again = contradictions_audit(project=default_project)
    assert [f["rule"] for f in again["findings"]] == ["alias"]
    assert again["findings"][0]["id"] != finding.pk


def test_auto_resolve_retires_the_older_side_and_keeps_history(default_project, conflicting):
    old, new = conflicting
    result = contradictions_audit(project=default_project, auto_resolve=True)
    assert (result["open"], result["auto_resolved"]) == (0, 1)
    [finding] = result["findings"]
    assert finding["state"] == "resolved" and finding["settled_by"] == "auto-resolve"
    assert "alias" in finding["reason"] and new["id"] in finding["reason"]
    retired = TemporalFact.objects.get(pk=old["id"])
    assert retired.superseded_by_id == new["id"] and retired.status == "superseded"
    view = entity_reads.entity_query(project=default_project, entity_id="auth_service")
    assert [f["id"] for f in view["facts"]] == [new["id"]]
    assert old["id"] in [f["id"] for f in view["history"]]
    assert integrity.integrity_verify(project=default_project)["verified"] is True
    assert contradictions_audit(project=default_project)["findings"] == []


def test_a_tie_is_left_open_for_a_person(default_project):
    at = "2026-03-01T00:00:00Z"
    fact(default_project, "api", "is_enabled", "true", at)
    fact(default_project, "api", "enabled", "false", at)
    result = contradictions_audit(project=default_project, auto_resolve=True)
    assert (result["open"], result["auto_resolved"]) == (1, 0)
    assert result["findings"][0]["resolvable"] is False


def test_as_of_audits_the_facts_held_then(default_project, conflicting):
    before_the_second = contradictions_audit(project=default_project, as_of="2026-02-01T00:00:00Z")
    assert before_the_second["findings"] == [] and before_the_second["facts_checked"] == 1


def _command(*args):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("audit_contradictions", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_cron_command_exit_codes_and_json(default_project):
    code, out, _ = _command("--json")
    assert code == 0 and json.loads(out)["open"] == 0
    fact(default_project, "queue", "delivery", "sync", "2026-01-01T00:00:00Z", singular=False)
    fact(default_project, "queue", "delivery", "async", "2026-02-01T00:00:00Z", singular=False)
    code, out, _ = _command("--project", "default", "--json")
    body = json.loads(out)
    assert code == 1 and body["open"] == 1
    [run] = body["runs"]
    assert run["project"] == "default" and run["findings"][0]["rule"] == "antonym"
    code, text, _ = _command("--project", "default")
    assert code == 1 and "antonym on queue" in text and "1 finding(s) open" in text
    code, out, _ = _command("--project", "default", "--auto-resolve", "--json")
    assert code == 0 and json.loads(out)["auto_resolved"] == 1
    code, _, err = _command("--project", "nowhere")
    assert code == 2 and "no project 'nowhere'" in err
    code, _, err = _command("--as-of", "yesterday")
    assert code == 2 and "as_of" in err


def test_rest_runs_the_same_audit_with_a_write_key(api, client_for, conflicting):
    response = api.post("/v1/graph/audit/contradictions", {}, format="json")
    assert response.status_code == 200, response.content
    assert [f["rule"] for f in response.json()["findings"]] == ["alias"]
    reader = client_for("read")
    assert reader.post("/v1/graph/audit/contradictions", {}, format="json").status_code == 403
    bad = api.post("/v1/graph/audit/contradictions", {"auto_resolve": "yes"}, format="json")
    assert bad.status_code == 400 and "auto_resolve" in bad.json()["fields"]


@pytest.fixture
def staff(client):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("compliance", "", "pw-for-tests-only")
    client.force_login(user)
    return client


def test_staff_dismiss_a_finding_in_the_admin_only_with_a_reason(
    staff, default_project, conflicting
):
    finding_id = contradictions_audit(project=default_project)["findings"][0]["id"]
    listing = staff.get("/admin/audit_app/contradictionfinding/")
    assert listing.status_code == 200 and "auth_service" in listing.content.decode()
    assert staff.get("/admin/audit_app/auditrun/").status_code == 200
    url = f"/admin/audit_app/contradictionfinding/{finding_id}/change/"
    refused = staff.post(url, {"state": "dismissed", "reason": ""})
    assert refused.status_code == 200 and "Say why" in refused.content.decode()
    assert ContradictionFinding.objects.get(pk=finding_id).state == "open"
    done = staff.post(url, {"state": "dismissed", "reason": "two names on purpose"})
    assert done.status_code == 302
    finding = ContradictionFinding.objects.get(pk=finding_id)
    assert (finding.state, finding.settled_by, finding.reason) == (
        "dismissed",
        "compliance",
        "two names on purpose",
    )
    assert finding.settled_at is not None
    assert staff.post("/admin/audit_app/contradictionfinding/add/").status_code == 403
    delete = f"/admin/audit_app/contradictionfinding/{finding_id}/delete/"
    assert staff.post(delete, {"post": "yes"}).status_code == 403
