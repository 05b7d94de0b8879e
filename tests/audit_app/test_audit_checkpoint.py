"""Signed checkpoints: manage.py audit_checkpoint signs the log's head and each project's graph
chain head with a key from the environment (never the database), keeps it and writes it for
shipping; injection_log_verify --checkpoint holds the log to it and refuses a tampered file."""

from __future__ import annotations

import json
import re

import pytest

from audit_app.checkpoint_reads import checkpoint_latest
from audit_app.checkpoints import audit_checkpoint_create
from audit_app.models import AuditCheckpoint, InjectionLogHead, audit_maintenance
from audit_app.selectors import injection_log_verify
from memoryproject.domain.hash_chain import checkpoint_mac
from memoryproject.errors import ApplicationError
from tests.audit_app import log_tampering as tamper
from tests.audit_app.log_tampering import run

pytestmark = pytest.mark.django_db


@pytest.fixture
def key(settings):
    settings.AUDIT_CHECKPOINT_KEY = tamper.KEY


def test_a_checkpoint_signs_the_log_and_graph_heads(default_project, key, tmp_path):
    records = tamper.build_log(default_project, 3)
    path = tmp_path / "checkpoint.json"
    checkpoint = audit_checkpoint_create(out=path)
    body = checkpoint.body.as_json()
    assert body["log"] == {
        "seq": 3,
        "head": records[-1].record_hash,
        "head_created_at": body["log"]["head_created_at"],
    }
    assert body["graph"]["default"]["size"] == 0
    assert checkpoint.hmac == checkpoint_mac(body, tamper.KEY)
    document = json.loads(path.read_text())
    assert (document["body"], document["hmac"]) == (body, checkpoint.hmac)
    # The witness entry that vouches for it outside the database (its public key suffices).
    assert document["witness"]["n"] == 1
    stored = AuditCheckpoint.objects.get()
    assert (stored.log_seq, stored.log_head, stored.body) == (3, records[-1].record_hash, body)
    latest = checkpoint_latest()
    assert (latest.id, latest.body, latest.hmac) == (stored.pk, checkpoint.body, checkpoint.hmac)


@pytest.mark.parametrize(
    ("value", "witness_dir", "phrase"),
    [("", "", "no checkpoint key"), ("short", None, "too short")],
)
def test_no_checkpoint_is_signed_without_a_proper_key(
    default_project, settings, value, witness_dir, phrase
):
    settings.AUDIT_CHECKPOINT_KEY = value
    if witness_dir is not None:
        settings.WITNESS_DIR = witness_dir
    with pytest.raises(ApplicationError, match=phrase):
        audit_checkpoint_create()
    code, _, err = run("audit_checkpoint")
    assert code == 1 and phrase in err
    assert not AuditCheckpoint.objects.exists()


def test_a_log_that_does_not_verify_is_not_signed(default_project, key):
    tamper.build_log(default_project, 3)
    tamper.edit(2, status="edited")
    code, out, _ = run("audit_checkpoint", "--json")
    assert code == 1
    assert "does not verify at seq 2" in json.loads(out)["error"]
    assert not AuditCheckpoint.objects.exists()


def test_the_commands_print_a_table_or_one_json_object(default_project, key, tmp_path):
    tamper.build_log(default_project, 2)
    path = tmp_path / "checkpoint.json"
    code, out, _ = run("audit_checkpoint", "--out", str(path))
    assert code == 0
    assert re.match(r"checkpoint #\d+ signed\n", out)
    assert "  log            seq 2 head " in out and f"  file           {path}\n" in out
    code, out, _ = run("audit_checkpoint", "--json")
    assert code == 0 and json.loads(out)["body"]["log"]["seq"] == 2
    code, out, _ = run("injection_log_verify", "--checkpoint", str(path))
    assert code == 0
    assert out.startswith("injection log intact: 2 records verified\n")
    assert "  checkpoint  file " in out and re.search(r"  checkpoint  #\d+ ", out)
    code, out, _ = run("injection_log_verify", "--checkpoint", str(path), "--json")
    result = json.loads(out)
    assert code == 0 and result["ok"] is True
    assert [c["source"] for c in result["checkpoints"]] == ["file", "stored"]


def test_verify_exits_1_and_names_the_record_against_a_checkpoint_file(
    default_project, key, tmp_path
):
    records = tamper.build_log(default_project, 4)
    path = tmp_path / "checkpoint.json"
    audit_checkpoint_create(out=path)
    tamper.delete(3, 4)
    tamper.set_head(2, records[1].record_hash)
    code, out, _ = run("injection_log_verify", "--checkpoint", str(path))
    assert code == 1
    assert out.startswith("injection log BROKEN at seq 3 (missing): the checkpoint file")
    assert "  kind        truncated\n" in out


def test_a_tampered_checkpoint_file_is_refused_clearly(default_project, key, tmp_path):
    tamper.build_log(default_project, 2)
    path = tmp_path / "checkpoint.json"
    audit_checkpoint_create(out=path)
    document = json.loads(path.read_text())
    document["body"]["log"]["head"] = "0" * 64
    path.write_text(json.dumps(document))
    code, _, err = run("injection_log_verify", "--checkpoint", str(path))
    assert code == 1
    assert "is refused: its HMAC does not match its body" in err
    code, out, _ = run("injection_log_verify", "--checkpoint", str(path), "--json")
    assert code == 1 and "HMAC does not match" in json.loads(out)["error"]
    path.write_text("{not json")
    assert "is not JSON" in run("injection_log_verify", "--checkpoint", str(path))[2]


def test_a_checkpoint_file_is_refused_under_another_key(default_project, key, settings, tmp_path):
    tamper.build_log(default_project, 1)
    path = tmp_path / "checkpoint.json"
    audit_checkpoint_create(out=path)
    settings.AUDIT_CHECKPOINT_KEY = "another-key-0123456789abcdef0123456789"
    with pytest.raises(ApplicationError, match="signed with another AUDIT_CHECKPOINT_KEY"):
        injection_log_verify(checkpoint=path)


def test_a_stored_checkpoint_altered_in_the_database_fails_verification(default_project, key):
    tamper.build_log(default_project, 2)
    audit_checkpoint_create()
    with audit_maintenance():
        AuditCheckpoint.objects.update(body={"forged": True})
    result = injection_log_verify()
    assert result.ok is False and result.first_broken is None
    assert result.checkpoints[0].signature_ok is False
    code, out, _ = run("injection_log_verify")
    assert code == 1 and "HMAC does not match" in out


def test_without_the_key_stored_checkpoints_are_skipped_with_a_warning(
    default_project, key, settings
):
    tamper.build_log(default_project, 2)
    audit_checkpoint_create()
    settings.AUDIT_CHECKPOINT_KEY = ""
    result = injection_log_verify()
    assert result.ok and result.checkpoints == []
    assert "stored checkpoints were not checked" in result.warnings[0]


def test_an_empty_log_can_be_checkpointed_and_verified(default_project, key):
    checkpoint = audit_checkpoint_create()
    assert checkpoint.body.log.seq == 0 and checkpoint.body.log.head_created_at is None
    assert injection_log_verify().ok
    assert not InjectionLogHead.objects.exists()
