"""The witness outside the database: files only its owner reads, statements only its key
signs, heads that only move forward, maintenance that needs its key and leaves its mark, a
verifier that needs only the public key."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.injection_log import delivered_text_erase
from audit_app.models import AuditMaintenanceGrant, audit_maintenance
from audit_app.retention import audit_log_purge
from audit_app.selectors import injection_log_verify
from memoryproject.domain.canonical import canonical_json
from memoryproject.errors import ApplicationError
from memoryproject.witness import LOG_STREAM, Witness, public_key_pem, witness
from memoryproject.witness_stores import SLOT, DirectoryStore
from tests.audit_app import log_tampering as tamper
from tests.audit_app.log_tampering import run

pytestmark = pytest.mark.django_db(transaction=True)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def entries(directory: str) -> list[dict]:
    lines = (Path(directory) / "entries.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_each_commit_moves_the_witnessed_head_and_files_are_the_owners_only(
    default_project, settings
):
    records = tamper.build_log(default_project, 3)
    audit_checkpoint_create()
    read = witness().read()
    head = read.heads[LOG_STREAM]
    assert (head.seq, head.hash) == (3, records[-1].record_hash)
    directory = Path(settings.WITNESS_DIR)
    assert mode(directory) == 0o700
    assert mode(directory / "entries.jsonl") == 0o600
    assert mode(directory / "heads" / f"{LOG_STREAM}.head") == 0o600
    assert mode(Path(settings.WITNESS_KEY_FILE)) == 0o600
    assert [e["body"]["kind"] for e in entries(settings.WITNESS_DIR)] == ["checkpoint"]


def test_a_head_never_moves_back(default_project):
    tamper.build_log(default_project, 2)
    found = witness()
    assert found.head_advance(LOG_STREAM, 1, "0" * 64) is False
    assert found.read().heads[LOG_STREAM].seq == 2


@pytest.mark.parametrize("damage", ["edit", "remove", "reorder"])
def test_a_witness_file_edited_by_hand_is_named_and_nothing_verifies(
    default_project, settings, damage
):
    tamper.build_log(default_project, 2)
    audit_checkpoint_create()
    audit_checkpoint_create()
    path = Path(settings.WITNESS_DIR) / "entries.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    if damage == "edit":
        lines[0] = lines[0].replace('"seq":2', '"seq":1')
    elif damage == "remove":
        del lines[0]
    else:
        lines.reverse()
    path.write_text("".join(lines))
    witness()._parsed = None  # another process reading the store afresh
    result = injection_log_verify()
    assert result.ok is False
    assert result.witness.state == "failed"
    problem = result.witness.problems[0]
    assert ("not a statement signed" in problem) or ("out of order" in problem)
    code, out, _ = run("witness", "--json")
    assert code == 1 and json.loads(out)["ok"] is False


def test_a_forged_head_file_is_refused(default_project, settings):
    tamper.build_log(default_project, 2)
    head = Path(settings.WITNESS_DIR) / "heads" / f"{LOG_STREAM}.head"
    raw = head.read_bytes()
    # A slot that claims more than was signed is ignored: the head stays the signed one.
    head.write_bytes(raw.replace(b'"seq":2', b'"seq":7'))
    assert witness().read().heads[LOG_STREAM].seq == 1
    # Both slots forged: nothing there is signed, and nothing verifies.
    head.write_bytes(raw.replace(b'"seq":2', b'"seq":7').replace(b'"seq":1', b'"seq":8'))
    result = injection_log_verify()
    assert result.ok is False
    assert "signature fails" in result.witness.problems[0]


def test_maintenance_needs_the_signing_key(default_project, settings, tmp_path):
    tamper.build_log(default_project, 1)
    public = tmp_path / "witness.pub"
    public.write_bytes(public_key_pem(witness().public))
    settings.WITNESS_KEY_FILE = str(tmp_path / "absent.key")
    settings.WITNESS_PUBLIC_KEY_FILE = str(public)
    with (
        pytest.raises(ApplicationError, match="needs the witness signing key"),
        audit_maintenance(purpose="edit by hand"),
    ):
        pass
    assert not AuditMaintenanceGrant.objects.exists()
    # A verify-only host still verifies.
    assert injection_log_verify().ok is True


def test_a_verifier_needs_only_the_public_key(default_project, settings, tmp_path):
    tamper.build_log(default_project, 2)
    path = tmp_path / "checkpoint.json"
    audit_checkpoint_create(out=path)
    code, out, _ = run("witness", "--public-key")
    assert code == 0 and out.startswith("-----BEGIN PUBLIC KEY-----")
    public = tmp_path / "witness.pub"
    public.write_text(out)
    settings.WITNESS_KEY_FILE = ""
    settings.WITNESS_PUBLIC_KEY_FILE = str(public)
    code, out, _ = run("injection_log_verify", "--checkpoint", str(path), "--json")
    assert code == 0, out
    assert json.loads(out)["witness"]["state"] == "verified"


def test_another_key_signs_nothing_the_verifier_accepts(default_project, settings, tmp_path):
    tamper.build_log(default_project, 2)
    settings.WITNESS_KEY_FILE = str(tmp_path / "another.key")  # made on first use
    result = injection_log_verify()
    assert result.ok is False
    assert "not a statement signed" in result.witness.problems[0] or (
        "signature fails" in result.witness.problems[0]
    )


def test_every_maintenance_is_granted_then_checkpointed(default_project, settings):
    records = tamper.build_log(default_project, 2)
    assert delivered_text_erase(sha256=records[0].prompt_sha256, reason="subject request")
    kinds = [
        (e["body"]["kind"], e["body"].get("purpose") or e["body"].get("reason"))
        for e in entries(settings.WITNESS_DIR)
    ]
    assert kinds == [("maintenance", "erasure"), ("checkpoint", "erasure")]
    # The grant's row went with the maintenance: the gate is closed again in the database.
    assert not AuditMaintenanceGrant.objects.exists()
    assert injection_log_verify().ok is True


def test_a_purge_is_witnessed_and_the_log_still_verifies(default_project, settings):
    now = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)
    with time_machine.travel(now - timedelta(days=400), tick=False):
        tamper.build_log(default_project, 3)
        audit_checkpoint_create()
    with time_machine.travel(now - timedelta(days=1), tick=False):
        tamper.append(default_project, 4)
    with time_machine.travel(now, tick=False):
        result = audit_log_purge(before=now - timedelta(days=200))
        assert result.records == 3
        verification = injection_log_verify()
    assert verification.ok is True, verification.witness
    purposes = [e["body"].get("purpose") for e in entries(settings.WITNESS_DIR)]
    assert "purge" in purposes
    last = entries(settings.WITNESS_DIR)[-1]["body"]
    assert last["kind"] == "checkpoint" and last["reason"] == "purge"
    assert last["anchor"]["seq"] == 3


def test_without_a_witness_the_log_is_unanchored_not_green(default_project, settings):
    tamper.build_log(default_project, 2)
    settings.WITNESS_DIR = ""
    result = injection_log_verify()
    assert result.ok is False and result.first_broken is None
    assert result.witness.state == "unanchored"
    code, out, _ = run("injection_log_verify")
    assert code == 1 and "unanchored" in out.lower()


def test_entries_are_canonical_json_and_lines_written_escaped_still_verify(settings):
    """An entry is named by the SHA-256 of its line as stored: a line written with the json
    module's ASCII escapes (as entries once were) verifies and chains on."""
    found = witness()
    found.append("note", {"label": "café ✓"})
    path = Path(settings.WITNESS_DIR) / "entries.jsonl"
    line = path.read_bytes().splitlines()[-1]
    assert line == canonical_json(json.loads(line))
    escaped = json.dumps(json.loads(line), sort_keys=True, separators=(",", ":")).encode()
    assert escaped != line and b"\\u00e9" in escaped
    path.write_bytes(path.read_bytes().replace(line, escaped))
    found._parsed = None  # another process reading the store afresh
    found.append("note", {"label": "after"})
    read = witness().read()
    assert read.problems == []
    assert [e.body.get("label") for e in read.entries][-2:] == ["café ✓", "after"]


# --- two writers on one head (two server workers) ----------------------------------------------

STREAM = "test_stream"


def _other_writer(found: Witness) -> Witness:
    """The same witness as another process sees it: its own descriptors, its own checked lines."""
    return Witness(DirectoryStore(found.store.directory), found.public, found.signer)


def _slots(found: Witness) -> list[bytes]:
    return found.store.head_lines(STREAM)


def _claims(found: Witness) -> list[int]:
    return sorted(json.loads(line)["body"]["seq"] for line in _slots(found) if line)


def _write_slot(found: Witness, index: int, line: bytes) -> None:
    path = Path(found.store.directory) / "heads" / f"{STREAM}.head"
    raw = bytearray(path.read_bytes().ljust(2 * SLOT))
    raw[index * SLOT : (index + 1) * SLOT] = line.ljust(SLOT - 1) + b"\n"
    path.write_bytes(bytes(raw))


def test_two_writers_move_one_head_forward_and_keep_the_two_newest(default_project):
    found = witness()
    other = _other_writer(found)
    assert found.head_advance(STREAM, 1, "a" * 64)
    assert other.head_advance(STREAM, 2, "b" * 64)
    assert found.head_advance(STREAM, 3, "c" * 64)
    assert _claims(found) == [2, 3]  # the other writer's head kept, this writer's older one gone
    assert other.head_advance(STREAM, 2, "d" * 64) is False  # 3 is witnessed: never back
    assert other.read(streams=(STREAM,)).heads[STREAM].seq == 3
    # The newest slot torn (a crash mid-write): the head before it is still signed and read.
    newest = next(i for i, line in enumerate(_slots(found)) if b'"seq":3' in line)
    _write_slot(found, newest, b'{"body":{"stream":"test_str')
    assert _other_writer(found).read(streams=(STREAM,)).heads[STREAM].seq == 2


def test_a_forged_slot_neither_stops_the_head_nor_is_read_as_it(default_project):
    found = witness()
    assert found.head_advance(STREAM, 1, "a" * 64)
    signed = next(line for line in _slots(found) if line)
    empty = next(i for i, line in enumerate(_slots(found)) if not line)
    # A slot claiming a later head than was signed: checked, refused, and the head moves on.
    _write_slot(found, empty, signed.replace(b'"seq":1', b'"seq":9'))
    assert found.head_advance(STREAM, 2, "b" * 64) is True
    assert _other_writer(found).read(streams=(STREAM,)).heads[STREAM].seq == 2
    # A forged slot claiming an earlier head than this one: the new head is written and read.
    lines = _slots(found)
    older = next(i for i, line in enumerate(lines) if b'"seq":2' not in line)
    _write_slot(found, older, signed.replace(b'"seq":1', b'"seq":3'))
    assert found.head_advance(STREAM, 4, "c" * 64) is True
    assert _other_writer(found).read(streams=(STREAM,)).heads[STREAM].seq == 4
    assert found.head_advance(STREAM, 3, "d" * 64) is False


def test_a_long_running_writer_keeps_a_bounded_number_of_head_lines(default_project, monkeypatch):
    # Every commit signs a new head line: a server process must not keep them all (a worker
    # answering a thousand plans a second would grow by a megabyte a second).
    monkeypatch.setattr("memoryproject.witness.VERIFIED_KEPT", 8)
    found = witness()
    for seq in range(1, 41):
        assert found.head_advance(STREAM, seq, f"{seq:064x}")
        assert len(found._verified) <= 8
    assert found.head_advance(STREAM, 39, "e" * 64) is False  # still never back
    assert _other_writer(found).read(streams=(STREAM,)).heads[STREAM].seq == 40
