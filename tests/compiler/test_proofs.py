"""Verifiable citation bundles: ``POST /v1/graph/compile`` with ``with_proofs``, ``manage.py
export_sources`` and the offline ``manage.py verify_sources``."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from audit_app.models import InjectionRecord
from graph_app.compiler import context_compile
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.integrity import integrity_verify

pytestmark = pytest.mark.django_db
URL = "/v1/graph/compile"
KEY = "proofs-test-key-" + "x" * 32
QUERY = "auth_service token format"


@pytest.fixture
def memory(default_project):
    episode_record(
        project=default_project,
        title="Switch to PASETO",
        category="adr",
        content="auth_service tokens move to PASETO v4 public keys.",
    )
    for n, value in enumerate(("JWT_HS256", "PASETO_v4_public")):
        fact_upsert(
            project=default_project,
            subject_id="auth_service",
            predicate="uses_token_format",
            object_value=value,
            valid_from=f"2026-0{n + 1}-20T00:00:00Z",
        )
    fact_upsert(
        project=default_project,
        subject_id="billing",
        predicate="owned_by",
        object_value="payments_team",
    )
    return default_project


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _export(tmp_path, *extra: str) -> tuple[dict, str]:
    path = tmp_path / "sources.json"
    code, out, err = _run(
        "export_sources", "--project", "default", "--query", QUERY, "--out", str(path), *extra
    )
    assert code == 0, err
    return json.loads(path.read_text()), out


def test_rest_with_proofs_answers_a_bundle_proven_against_the_integrity_root(api, memory):
    response = api.post(URL, {"query": QUERY, "with_proofs": True}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    bundle = body["proofs"]
    assert bundle["format"] == "memory-citation-bundle/1"
    assert [i["id"] for i in bundle["items"]] == [i["id"] for i in body["items"]]
    assert {i["kind"] for i in bundle["items"]} == {"fact", "episode"}
    root = bundle["root"]
    integrity = integrity_verify(project=memory)
    assert root["root"] == integrity.merkle_root
    assert root["tree_size"] == integrity.records == 4
    assert root["signed"] is False and root["signature"] is None
    for item in bundle["items"]:
        record = json.loads(item["text"])
        assert (record["type"], record["id"]) == (item["kind"], item["id"])
        assert item["proof"]["tree_size"] == 4


def test_without_with_proofs_the_answer_is_as_before(api, memory):
    response = api.post(URL, {"query": QUERY}, format="json")
    body = response.json()
    assert "proofs" not in body
    body.pop("injection_id")
    assert body == context_compile(project=memory, query=QUERY)


def test_a_rest_answer_with_proofs_verifies_offline(api, memory, tmp_path):
    body = api.post(URL, {"query": QUERY, "with_proofs": True}, format="json").json()
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(body))
    code, out, _ = _run("verify_sources", str(path), "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["verified"] == len(body["items"]) > 0


def test_export_then_verify_round_trips(memory, tmp_path):
    bundle, out = _export(tmp_path)
    assert "written to" in out and "UNSIGNED" in out
    receipt = InjectionRecord.objects.order_by("-seq").first()
    assert receipt is not None and (receipt.channel, receipt.client) == ("cli", "export_sources")
    assert receipt.request["with_proofs"] is True
    code, out, _ = _run("verify_sources", str(tmp_path / "sources.json"))
    assert code == 0
    assert f"{len(bundle['items'])} of {len(bundle['items'])} items proven" in out
    assert "unsigned" in out


def test_a_signed_root_verifies_with_the_key_and_not_with_another(memory, tmp_path, settings):
    settings.AUDIT_CHECKPOINT_KEY = KEY
    bundle, out = _export(tmp_path, "--max-tokens", "300")
    assert bundle["root"]["signed"] is True and "HMAC-SHA256" in out
    path = str(tmp_path / "sources.json")
    code, out, _ = _run("verify_sources", path, "--json")
    assert code == 0 and json.loads(out)["signature"] == "valid"
    settings.AUDIT_CHECKPOINT_KEY = "another-key-" + "y" * 32
    code, out, _ = _run("verify_sources", path, "--json")
    assert code == 1 and json.loads(out)["signature"] == "invalid"
    settings.AUDIT_CHECKPOINT_KEY = ""
    code, out, _ = _run("verify_sources", path)
    assert code == 0 and "not checked" in out


def _tamper_text(item):
    item["text"] = item["text"].replace("auth_service", "auth_servicf", 1)


def _tamper_sha(item):
    item["sha256"] = "0" * 64


def _tamper_index(item):
    item["proof"]["leaf_index"] = (item["proof"]["leaf_index"] + 1) % item["proof"]["tree_size"]


def _tamper_proof(item):
    path = item["proof"]["audit_path"]
    path[0] = ("0" if path[0][0] != "0" else "1") + path[0][1:]


@pytest.mark.parametrize("tamper", [_tamper_text, _tamper_sha, _tamper_index, _tamper_proof])
def test_a_tampered_item_fails_naming_its_id(memory, tmp_path, tamper):
    bundle, _ = _export(tmp_path)
    victim = bundle["items"][0]
    tamper(victim)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(bundle))
    code, out, _ = _run("verify_sources", str(path), "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert [f["id"] for f in report["failed"]] == [victim["id"]]
    code, out, _ = _run("verify_sources", str(path))
    assert code == 1 and "NOT VERIFIED" in out and f"{victim['id']}" in out and "FAILED" in out


@pytest.mark.parametrize(
    ("content", "phrase"),
    [(None, "cannot read"), ("not json", "is not JSON"), ('{"a": 1}', "not a citation bundle")],
)
def test_verify_sources_refuses_what_is_no_bundle_with_exit_2(tmp_path, content, phrase):
    path = tmp_path / "bundle.json"
    if content is not None:
        path.write_text(content)
    code, _, err = _run("verify_sources", str(path))
    assert code == 2 and phrase in err and "FILE" in err


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (("--project", "nowhere"), "project"),
        (("--project", "default", "--max-tokens", "10"), "max_tokens"),
        (("--project", "default", "--out", "/nonexistent/dir/x.json"), "--out"),
    ],
)
def test_export_sources_refuses_bad_arguments_with_exit_2(memory, tmp_path, args, phrase):
    argv = ["export_sources", "--query", QUERY, "--out", str(tmp_path / "x.json"), *args]
    code, _, err = _run(*argv)
    assert code == 2 and phrase in err
    assert not (tmp_path / "x.json").exists()
