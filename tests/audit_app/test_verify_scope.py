"""Verification per project: `GET /v1/audit/verify` and the MCP tool `memory_verify_audit`.

A key bound to some projects sees its own projects' chain and graph status only: whether the
whole log verifies, how many of its records were checked, its newest record, and where the log
breaks only when that is one of its records. The whole log's figures (head, all records, anchor,
checkpoints, other projects) need the auditor role: an admin key bound to every project. Both
doors give the same answer for the same key.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.models import InjectionLogHead, InjectionRecord
from graph_app.fact_writes import fact_upsert
from graph_app.graph_head import graph_head
from memoryproject.models import Project
from memoryproject.services import api_key_create, project_create
from tests.audit_app import log_tampering as tamper

ALPHA, BETA = "alpha", "beta"


def _seed() -> None:
    """Projects alpha and beta, each with a graph, and a log whose last record is beta's (so
    the log's head is not alpha's own newest record)."""
    alpha, _ = project_create(slug=ALPHA)
    beta, _ = project_create(slug=BETA)
    fact_upsert(project=alpha, subject_id="alpha_svc", predicate="runs_on", object_value="k8s")
    fact_upsert(project=beta, subject_id="beta_svc", predicate="runs_on", object_value="nomad")
    for n, project in enumerate((alpha, beta, alpha, beta), start=1):
        tamper.append(project, n)


def _key(scope: str, projects: list[str]) -> str:
    return api_key_create(name="verify scope", project_slugs=projects, scope=scope)[1]


def _auditor_key() -> str:
    return _key("admin", list(Project.objects.values_list("slug", flat=True)))


def _get(key: str, **query: str) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client.get("/v1/audit/verify", query)


def _secrets_of_others() -> list[str]:
    """What a key bound to alpha alone must not learn: beta's name, records and graph head,
    the log's head."""
    beta = Project.objects.get(slug=BETA)
    hashes = InjectionRecord.objects.filter(project=beta).values_list("record_hash", flat=True)
    head = InjectionLogHead.objects.get()
    return [BETA, *hashes, head.last_hash, graph_head(beta).head_hash]


def _stable(body: Any) -> Any:
    """The answer without the graphs' check times (two calls are two verifications)."""
    if isinstance(body, dict):
        return {k: _stable(v) for k, v in body.items() if k != "checked_at"}
    if isinstance(body, list):
        return [_stable(v) for v in body]
    return body


@pytest.fixture
def world(db, settings):
    settings.AUDIT_CHECKPOINT_KEY = tamper.KEY
    _seed()
    audit_checkpoint_create()


def test_a_project_key_sees_only_its_projects_chain_and_graph(world):
    response = _get(_key("admin", [ALPHA]))
    assert response.status_code == 200, response.content
    body = response.json()
    for secret in _secrets_of_others():
        assert secret not in response.content.decode(), secret
    assert body["verified"] is True
    assert body["projects"] == [ALPHA] and set(body["graph"]) == {ALPHA}
    assert body["auditor"] is None
    newest = InjectionRecord.objects.get(seq=3)
    assert body["log"] == {
        "ok": True,
        "statement": body["log"]["statement"],
        "checked": 2,
        "first_broken": None,
        "latest": {"seq": 3, "hash": newest.record_hash},
    }
    assert "verifies" in body["log"]["statement"]


def test_the_auditor_sees_every_project_and_the_whole_log(world):
    body = _get(_auditor_key()).json()
    assert body["verified"] is True and body["projects"] == ["alpha", "beta", "default"]
    assert set(body["graph"]) == {"alpha", "beta", "default"}
    head = InjectionLogHead.objects.get()
    whole = body["auditor"]["log"]
    assert (whole["checked"], whole["head"]) == (4, {"seq": 4, "hash": head.last_hash})
    assert whole["anchor"]["kind"] == "genesis" and whole["checkpoints"]
    assert set(body["auditor"]["checkpoint"]["body"]["graph"]) >= {ALPHA, BETA}
    assert body["log"]["checked"] == 4 and body["log"]["latest"]["seq"] == 4


def test_an_admin_key_missing_one_project_is_no_auditor(world):
    assert _get(_key("admin", [ALPHA, BETA])).json()["auditor"] is None
    auditor = _auditor_key()
    assert _get(auditor).json()["auditor"] is not None
    project_create(slug="gamma")  # a project created since: the key no longer reaches all
    assert _get(auditor).json()["auditor"] is None


def test_project_narrows_to_one_of_the_keys_projects(world):
    key = _key("admin", [ALPHA])
    assert _get(key, project=ALPHA).json()["projects"] == [ALPHA]
    refused = _get(key, project=BETA)
    assert refused.status_code == 404 and BETA in refused.json()["message"]
    narrowed = _get(_auditor_key(), project=BETA).json()
    assert narrowed["projects"] == [BETA] and set(narrowed["graph"]) == {BETA}
    assert narrowed["auditor"]["log"]["checked"] == 4


def test_only_an_admin_key_verifies(world):
    for scope in ("read", "write"):
        response = _get(_key(scope, [ALPHA]))
        assert response.status_code == 403 and "admin" in response.json()["message"]


def test_a_break_in_another_projects_record_is_not_shown(world):
    tamper.edit(2, client="api_key:forged (agent)")  # beta's record
    response = _get(_key("admin", [ALPHA]))
    body = response.json()
    for secret in _secrets_of_others():
        assert secret not in response.content.decode(), secret
    assert body["verified"] is False and body["log"]["ok"] is False
    assert body["log"]["first_broken"] is None
    assert body["log"]["checked"] == 1  # alpha's record before the break
    assert "does not verify" in body["log"]["statement"]
    assert "seq" not in body["log"]["statement"]
    whole = _get(_auditor_key()).json()
    assert whole["auditor"]["log"]["first_broken"]["seq"] == 2
    assert whole["log"]["first_broken"]["project"] == BETA


def test_a_break_in_the_keys_own_record_is_named(world):
    tamper.edit(3, client="api_key:forged (agent)")  # alpha's record
    body = _get(_key("admin", [ALPHA])).json()
    broken = body["log"]["first_broken"]
    assert body["verified"] is False
    assert (broken["seq"], broken["kind"], broken["project"]) == (3, "altered", ALPHA)
    assert broken["id"] == InjectionRecord.objects.get(seq=3).pk
    assert "seq 3" in body["log"]["statement"] and "alpha" in body["log"]["statement"]


# --- the same answers over MCP ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_mcp_answers_as_rest_for_the_same_key(tmp_path, settings):
    from django.db import connection

    from tests.mcp.conftest import start_http_server, stop_http_server, structured, text_of

    settings.AUDIT_CHECKPOINT_KEY = tamper.KEY
    _seed()
    audit_checkpoint_create()
    keys = {
        "alpha": _key("admin", [ALPHA]),
        "auditor": _auditor_key(),
        "read": _key("read", [ALPHA]),
    }
    rest = {name: _get(key).json() for name, key in keys.items() if name != "read"}
    secrets = _secrets_of_others()

    async def verify(session: Any) -> Any:
        return (
            await session.call_tool("memory_verify_audit", {}),
            await session.call_tool("memory_verify_audit", {"project": BETA}),
        )

    server = start_http_server(tmp_path, env={"AUDIT_CHECKPOINT_KEY": tamper.KEY})
    try:
        answers = {name: server.run(verify, key=key) for name, key in keys.items()}
        tamper.edit(2, client="api_key:forged (agent)")  # beta's record
        broken, _ = server.run(verify, key=keys["alpha"])
        rest_broken = _get(keys["alpha"]).json()
    finally:
        stop_http_server(server)
        connection.close()

    alpha, beta_asked = answers["alpha"]
    assert _stable(structured(alpha)) == _stable(rest["alpha"])
    assert structured(alpha)["auditor"] is None
    assert beta_asked.is_error and "no project 'beta'" in text_of(beta_asked)
    for secret in secrets:
        assert secret not in json.dumps(structured(alpha)) + text_of(alpha), secret
    auditor, narrowed = answers["auditor"]
    assert _stable(structured(auditor)) == _stable(rest["auditor"])
    assert structured(auditor)["auditor"]["log"]["checked"] == 4
    assert structured(narrowed)["projects"] == [BETA]
    refused, _ = answers["read"]
    assert refused.is_error and "scope 'admin'" in text_of(refused)

    tool = structured(broken)
    assert _stable(tool) == _stable(rest_broken)
    assert tool["verified"] is False and tool["log"]["first_broken"] is None
    for secret in secrets:
        assert secret not in json.dumps(tool) + text_of(broken), secret
