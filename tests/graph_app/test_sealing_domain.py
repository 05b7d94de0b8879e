"""The change log's verification as pure functions: a chain verifies, any single mutation of it
is caught and named, duplicates and gaps are told apart, and the records found are compared
with the state the log gives them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_app.domain.records import change_canonical, change_hash
from graph_app.domain.sealing import (
    ChangeEntry,
    FoundRecord,
    chain_verify,
    checkpoint_verify,
    head_verify,
    records_verify,
    unsealed_problems,
)
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.domain.hashing import record_sha256

PROJECT = "default"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def chain(n: int, *, project: str = PROJECT) -> list[ChangeEntry]:
    entries, head = [], GENESIS_HASH
    for seq in range(1, n + 1):
        fields = (seq, seq, "asserted", "fact", f"fact_{seq}", f"{seq:064x}", "", "", T0, head)
        head = change_hash(project, *fields)
        entries.append(ChangeEntry(*fields, head))
    return entries


def problems(entries: list[ChangeEntry], *, size: int, head: str) -> set[tuple[str, str]]:
    report = chain_verify(entries, project=PROJECT)
    head_verify(report, size=size, head=head)
    return {(p.kind, p.id) for p in report.problems}


def relink(entries: list[ChangeEntry], start: int) -> list[ChangeEntry]:
    """Rehashes entries[start:] (0-based) onto their predecessors, as a full rechain does."""
    out = entries[:start]
    for entry in entries[start:]:
        prev = out[-1].hash if out else GENESIS_HASH
        fields = (*entry[:9], prev)
        out.append(ChangeEntry(*fields, change_hash(PROJECT, *fields)))
    return out


texts = st.text(max_size=20)


@settings(max_examples=200)
@given(
    action=texts,
    record_type=texts,
    record_id=texts,
    note=st.text(max_size=40),
    seq=st.integers(min_value=0, max_value=2**53 - 1),
    revision=st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    micro=st.integers(min_value=0, max_value=10**12),
)
def test_the_fast_change_hash_is_the_canonical_forms_hash(
    action, record_type, record_id, note, seq, revision, micro
):
    fields = {
        "project": "p",
        "seq": seq,
        "revision": revision,
        "action": action,
        "record_type": record_type,
        "record_id": record_id,
        "record_sha256": "a" * 64,
        "erased_sha256": "",
        "note": note,
        "recorded_at": T0 + timedelta(microseconds=micro),
        "prev_hash": GENESIS_HASH,
    }
    assert change_hash(**fields) == record_sha256(change_canonical(**fields))


def test_out_of_range_numbers_take_the_general_path():
    fields = ("p", 2**60, 1, "a", "fact", "x", "h", "", "", T0, GENESIS_HASH)
    with pytest.raises(Exception):  # noqa: B017 - the canonicaliser refuses it, as for records
        change_hash(*fields)


def test_a_chain_verifies_against_its_head():
    entries = chain(5)
    assert problems(entries, size=5, head=entries[-1].hash) == set()


@settings(max_examples=150)
@given(
    n=st.integers(min_value=2, max_value=12),
    data=st.data(),
)
def test_any_single_mutation_of_a_chain_is_caught(n, data):
    entries = chain(n)
    head = (n, entries[-1].hash)
    index = data.draw(st.integers(min_value=0, max_value=n - 1))
    field = data.draw(st.sampled_from(ChangeEntry._fields))
    entry = entries[index]
    value = getattr(entry, field)
    if isinstance(value, int):
        changed = value + 1
    elif isinstance(value, datetime):
        changed = value + timedelta(microseconds=1)
    else:
        changed = value + "x"
    mutated = [*entries[:index], entry._replace(**{field: changed}), *entries[index + 1 :]]
    mutated.sort(key=lambda e: e.seq)
    assert problems(mutated, size=head[0], head=head[1])


def test_a_gap_and_a_duplicate_are_told_apart():
    entries = chain(5)
    gap = {
        (p.kind, p.id, "missing" in p.reason)
        for p in chain_verify([*entries[:2], *entries[3:]], project=PROJECT).problems
    }
    assert gap == {("chain", "3", True)}
    twice = [*entries[:3], entries[2], *entries[3:]]
    (duplicate,) = chain_verify(twice, project=PROJECT).problems
    assert duplicate.id == "3" and "duplicated" in duplicate.reason


def test_an_entry_rewritten_and_rehashed_is_named_not_its_successor():
    entries = chain(5)
    rewritten = entries[2]._replace(record_sha256="f" * 64)
    rewritten = rewritten._replace(hash=change_hash(PROJECT, *rewritten[:10]))
    report = chain_verify([*entries[:2], rewritten, *entries[3:]], project=PROJECT)
    assert [(p.kind, p.id) for p in report.problems] == [("chain", "3")]


def test_truncation_appends_and_full_rechains_against_head_and_checkpoint():
    entries = chain(6)
    size, head = 6, entries[-1].hash
    assert ("head", "6") in problems(entries[:4], size=size, head=head)
    forged = relink([*entries, entries[-1]._replace(seq=7, record_id="ghost")], 6)
    assert ("head", "6") in problems(forged, size=size, head=head)
    rechained = relink([*entries[:2], entries[2]._replace(record_id="other"), *entries[3:]], 2)
    assert problems(rechained, size=6, head=rechained[-1].hash) == set()
    report = chain_verify(rechained, project=PROJECT, watch=4)
    checkpoint_verify(report, size=4, head=entries[3].hash)
    assert report.checkpoint_consistent is False
    report = chain_verify(entries, project=PROJECT, watch=4)
    checkpoint_verify(report, size=4, head=entries[3].hash)
    assert report.checkpoint_consistent is True and report.problems == []
    report = chain_verify(entries[:3], project=PROJECT, watch=4)
    checkpoint_verify(report, size=4, head=entries[3].hash)
    assert "fewer" in report.problems[0].reason


def test_an_empty_checkpoint_is_the_genesis_hash():
    report = chain_verify([], project=PROJECT, watch=0)
    checkpoint_verify(report, size=0, head=GENESIS_HASH)
    assert report.checkpoint_consistent is True


def test_records_are_compared_with_the_state_the_log_gives_them():
    entries = chain(4)
    state = chain_verify(entries, project=PROJECT).state
    found = {
        ("fact", "fact_1"): FoundRecord(entries[0].record_sha256, True, 1),
        ("fact", "fact_2"): FoundRecord("e" * 64, True, 2),  # rewritten, own hash recomputed
        ("fact", "fact_3"): FoundRecord(entries[2].record_sha256, True, 0),  # revision lowered
        ("fact", "fact_9"): FoundRecord("9" * 64, True, 4),  # never sealed
    }
    found_problems, unsealed = records_verify(found, state, revision=4)
    assert {(p.kind, p.id) for p in found_problems} == {
        ("rewritten", "fact_2"),
        ("revision", "fact_3"),
        ("deleted", "fact_4"),
    }
    assert unsealed == [("fact", "fact_9")]
    told = unsealed_problems(unsealed, {("fact", "fact_9"): ("fact", "fact_1")})
    assert [(p.kind, p.id) for p in told] == [("duplicated", "fact_9")]
    assert [p.kind for p in unsealed_problems(unsealed, {})] == ["inserted"]
