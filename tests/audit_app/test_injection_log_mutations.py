"""The mutation matrix of the injection log: every edit an attacker with database access can
make behind the application's back is detected, and the record named is the one changed
(against the head, or a signed checkpoint where the head was rewritten too). Runs on SQLite
and PostgreSQL alike; the tampering opens the maintenance gate (or drops constraints) inside
the test's transaction."""

from __future__ import annotations

import json
import tempfile

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.domain.chain import HASHED_FIELDS
from audit_app.models import AuditCheckpoint, InjectionLogHead, InjectionRecord
from audit_app.selectors import injection_log_verify
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from tests.audit_app import log_tampering as tamper

pytestmark = pytest.mark.django_db

SIZE = 5
MIDDLE = 3


@pytest.fixture
def key(settings):
    settings.AUDIT_CHECKPOINT_KEY = tamper.KEY


@pytest.fixture
def log(default_project, key):
    """Five records and a signed checkpoint of them (stored)."""
    records = tamper.build_log(default_project, SIZE)
    audit_checkpoint_create()
    return records


def broken(**checkpoint):
    result = injection_log_verify(**checkpoint)
    assert result.ok is False, result.as_json()
    return result.first_broken


def test_the_untouched_log_verifies_against_head_and_checkpoint(log):
    result = injection_log_verify()
    assert result.ok and result.checked == SIZE
    assert [c.consistent for c in result.checkpoints] == [True]


# --- a byte flipped in each stored field ------------------------------------------------------

# Every stored column the chain hashes (seq and project have tests of their own), and the hash.
FIELDS = [name for name in HASHED_FIELDS if name not in ("seq", "project_id")] + ["record_hash"]


@pytest.mark.parametrize("field", FIELDS)
def test_a_flipped_field_is_named_at_its_own_record(log, field):
    target = log[MIDDLE - 1]
    tamper.edit(MIDDLE, **{field: tamper.flip(getattr(target, field))})
    found = broken()
    assert (found.id, found.seq, found.kind) == (target.pk, MIDDLE, "altered")
    assert found.reason == "record_hash does not match the record's fields"


def test_a_changed_project_is_named(log):
    other = Project.objects.create(slug="other", name="other")
    tamper.edit(MIDDLE, project_id=other.pk)
    found = broken()
    assert (found.id, found.kind) == (log[MIDDLE - 1].pk, "altered")


def test_a_changed_seq_is_named_where_it_now_stands(log):
    target = log[MIDDLE - 1]
    tamper.edit(MIDDLE, seq=MIDDLE + 100)
    found = broken()
    assert (found.id, found.seq, found.kind) == (target.pk, MIDDLE + 100, "renumbered")


def test_a_flipped_byte_in_the_delivered_text_is_named(log):
    tamper.flip_text(MIDDLE)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[MIDDLE - 1].pk, MIDDLE, "text")
    assert found.reason == "system_prompt does not match prompt_sha256"


def test_a_flipped_head_is_detected(log):
    head = InjectionLogHead.objects.get()
    tamper.set_head(head.seq, tamper.flip(head.last_hash))
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[-1].pk, SIZE, "head")


# --- records removed, moved, added ------------------------------------------------------------


def test_a_deleted_middle_record_is_a_gap_named_after_it(log):
    tamper.delete(MIDDLE)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[MIDDLE].pk, MIDDLE + 1, "gap")
    assert found.reason == f"seq {MIDDLE + 1} follows {MIDDLE - 1}: record {MIDDLE} is missing"


def test_two_swapped_records_are_named(log):
    tamper.swap(2, 3)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[2].pk, 2, "altered")


def test_a_forged_record_inserted_with_the_rest_renumbered_is_named(log):
    with tamper.audit_maintenance():
        for seq in range(SIZE, MIDDLE - 1, -1):
            InjectionRecord.objects.filter(seq=seq).update(seq=seq + 1)
        InjectionLogHead.objects.filter(pk=1).update(seq=SIZE + 1)
    fake = tamper.forged(MIDDLE, log[MIDDLE - 2].record_hash)
    found = broken()
    assert (found.id, found.seq, found.kind) == (fake.pk, MIDDLE, "inserted")


def test_a_forged_second_record_at_a_seq_is_named(log):
    tamper.drop_unique_constraints()
    fake = tamper.forged(MIDDLE, log[MIDDLE - 2].record_hash, pk=10_000)
    found = broken()
    assert (found.id, found.seq, found.kind) == (fake.pk, MIDDLE, "inserted")


def test_a_duplicated_record_is_named_as_a_duplicate_not_a_gap(log):
    tamper.drop_unique_constraints()
    copy = tamper.copy_row(MIDDLE)
    found = broken()
    assert (found.id, found.seq, found.kind) == (copy.pk, MIDDLE, "duplicate")


def test_a_truncated_tail_is_named_against_the_head(log):
    tamper.delete(4, 5)
    found = broken()
    assert (found.id, found.seq, found.kind) == (None, 4, "truncated")
    assert "the head reaches seq 5" in found.reason


def test_a_truncated_tail_with_the_head_set_back_is_named_against_the_checkpoint(log):
    tamper.delete(4, 5)
    tamper.set_head(3, log[2].record_hash)
    found = broken()
    assert (found.id, found.seq, found.kind) == (None, 4, "truncated")
    assert "checkpoint #" in found.reason


def test_a_wiped_log_with_the_head_reset_is_named_against_the_checkpoint(log):
    tamper.delete(*range(1, SIZE + 1))
    tamper.set_head(0, GENESIS_HASH)
    found = broken()
    assert (found.id, found.seq, found.kind) == (None, 1, "truncated")
    assert "records 1-5 are missing" in found.reason


def test_a_wiped_log_restarted_with_a_forged_history_is_caught_by_the_checkpoint(log):
    tamper.delete(*range(1, SIZE + 1))
    previous = GENESIS_HASH
    for seq in range(1, SIZE + 2):
        previous = tamper.forged(seq, previous).record_hash
    tamper.set_head(SIZE + 1, previous)
    found = broken()
    assert (found.seq, found.kind) == (SIZE, "checkpoint")


def test_the_last_record_rewritten_and_rehashed_is_named_against_the_head(log):
    tamper.edit(SIZE, status="flagged")
    tamper.rehash(SIZE)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[-1].pk, SIZE, "head")


def test_the_last_record_rewritten_with_the_head_moved_is_named_against_the_checkpoint(log):
    tamper.edit(SIZE, status="flagged")
    tamper.set_head(SIZE, tamper.rehash(SIZE))
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[-1].pk, SIZE, "checkpoint")


def test_a_middle_record_rewritten_and_rehashed_is_named_not_the_next_one(log):
    tamper.edit(MIDDLE, trust_score=0.99)
    tamper.rehash(MIDDLE)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[MIDDLE - 1].pk, MIDDLE, "rewritten")


def test_a_prev_hash_rewritten_and_rehashed_names_that_record(log):
    tamper.edit(MIDDLE, prev_hash=tamper.flip(log[MIDDLE - 1].prev_hash))
    tamper.rehash(MIDDLE)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[MIDDLE - 1].pk, MIDDLE, "link")


def test_a_middle_record_rewritten_and_everything_after_rechained_fails_the_checkpoint(log):
    tamper.edit(MIDDLE, trust_score=0.99)
    tamper.rechain(MIDDLE)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[-1].pk, SIZE, "checkpoint")
    assert "this record, or one before it, was rewritten" in found.reason


def test_a_rechain_without_the_head_moved_fails_the_head(log):
    tamper.edit(MIDDLE, trust_score=0.99)
    tamper.rechain(MIDDLE, move_head=False)
    found = broken()
    assert (found.id, found.seq, found.kind) == (log[-1].pk, SIZE, "head")


def test_a_forged_valid_append_is_named_beyond_the_head(log):
    fake = tamper.forged(SIZE + 1, log[-1].record_hash)
    found = broken()
    assert (found.id, found.seq, found.kind) == (fake.pk, SIZE + 1, "beyond_head")


# --- checkpoint files -------------------------------------------------------------------------


def test_a_checkpoint_file_detects_a_wipe_made_after_it(log, tmp_path):
    path = tmp_path / "checkpoint.json"
    audit_checkpoint_create(out=path)
    tamper.delete(*range(1, SIZE + 1))
    tamper.set_head(0, GENESIS_HASH)
    with tamper.audit_maintenance():
        AuditCheckpoint.objects.all().delete()  # the stored ones are gone too
    result = injection_log_verify(checkpoint=path)
    assert result.ok is False
    assert (result.first_broken.seq, result.first_broken.kind) == (1, "truncated")
    assert "checkpoint file" in result.first_broken.reason
    assert [(c.source, c.consistent) for c in result.checkpoints] == [("file", False)]


def test_a_tampered_checkpoint_file_is_refused(log, tmp_path):
    path = tmp_path / "checkpoint.json"
    audit_checkpoint_create(out=path)
    document = json.loads(path.read_text())
    document["body"]["log"]["seq"] = 2
    path.write_text(json.dumps(document))
    with pytest.raises(ApplicationError, match="HMAC does not match"):
        injection_log_verify(checkpoint=path)


# --- property: a random log verifies, any single mutation fails ---------------------------------

MUTATIONS = [
    "flip",
    "text",
    "delete",
    "swap",
    "truncate",
    "rewrite",
    "rechain",
    "append",
    "insert",
]


def mutate(kind: str, size: int, target: int, field: str) -> None:
    records = list(InjectionRecord.objects.order_by("seq"))
    last = records[-1]
    if kind == "flip":
        tamper.edit(target, **{field: tamper.flip(getattr(records[target - 1], field))})
    elif kind == "text":
        tamper.flip_text(target)
    elif kind == "delete":
        tamper.delete(target)
    elif kind == "swap":
        tamper.swap(target, target % size + 1) if size > 1 else tamper.delete(target)
    elif kind == "truncate":
        tamper.delete(*range(target, size + 1))
        tamper.set_head(target - 1, records[target - 2].record_hash if target > 1 else GENESIS_HASH)
    elif kind == "rewrite":
        tamper.edit(target, client="rewritten")
        tamper.rehash(target)
    elif kind == "rechain":
        tamper.edit(target, client="rewritten")
        tamper.rechain(target)
    elif kind == "append":
        tamper.forged(size + 1, last.record_hash)
    elif kind == "insert":
        with tamper.audit_maintenance():
            for seq in range(size, target - 1, -1):
                InjectionRecord.objects.filter(seq=seq).update(seq=seq + 1)
            InjectionLogHead.objects.filter(pk=1).update(seq=size + 1)
        previous = records[target - 2].record_hash if target > 1 else GENESIS_HASH
        tamper.forged(target, previous)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=st.data(),
    statuses=st.lists(st.sampled_from(["injected", "flagged", "empty"]), min_size=1, max_size=6),
    clients=st.text(alphabet="abcxyz:() _-é", max_size=12),
)
def test_a_random_log_verifies_and_any_single_mutation_fails(
    default_project, key, data, statuses, clients, settings, tmp_path
):
    # Each example's database is rolled back: its witness starts empty too.
    settings.WITNESS_DIR = tempfile.mkdtemp(dir=tmp_path)
    with transaction.atomic():
        for n, status in enumerate(statuses, start=1):
            tamper.append(default_project, n, status=status, client=clients + str(n))
        assert injection_log_verify().ok
        audit_checkpoint_create()
        size = len(statuses)
        kind = data.draw(st.sampled_from(MUTATIONS), label="mutation")
        target = data.draw(st.integers(min_value=1, max_value=size), label="target seq")
        field = data.draw(st.sampled_from(FIELDS), label="field")
        mutate(kind, size, target, field)
        assert not injection_log_verify().ok
        transaction.set_rollback(True)
