"""The chain status of the console stays cheap with tens of thousands of records: it verifies
from the latest signed checkpoint to the head (or, with no checkpoint, only the newest records)
in a bounded number of queries and rows, says exactly what it checked, and still names the seq
where tampering inside that range breaks the chain."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.console_selectors import chain_status
from audit_app.domain.chain import RECORD_FORMAT, record_hash, sha256_text
from audit_app.models import (
    AuditCheckpoint,
    DeliveredText,
    InjectionRecord,
    audit_maintenance,
    record_payload,
)
from audit_app.selectors import RECENT_WINDOW, injection_log_verify, injection_log_verify_recent
from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from tests.audit_app.log_tampering import KEY, append, build_log, delete, edit, record, set_head

pytestmark = pytest.mark.django_db

LIST = "/admin/audit_app/injectionrecord/"
CHAIN = "/console/dashboard/chain/"
SIZE = 20_000
AFTER = 200
TEXTS = 50


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("auditor", "", "pw-for-tests-only")
    client.force_login(user)
    return client


@pytest.fixture
def keyed(settings):
    settings.AUDIT_CHECKPOINT_KEY = KEY


# --- measuring what a read costs -----------------------------------------------------------


class Reads:
    """Every statement run, with its parameters; ``rows`` re-runs each SELECT as a count of
    the rows it answered (what the database handed back, not what Python kept)."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, Any]] = []

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, *rest: Any) -> Any:
        self.statements.append((sql, params))
        return execute(sql, params, *rest)

    @property
    def queries(self) -> int:
        return len(self.statements)

    def rows(self) -> int:
        total = 0
        with connection.cursor() as cursor:
            for sql, params in self.statements:
                if not sql.lstrip().upper().startswith("SELECT"):
                    continue
                cursor.execute(f"SELECT COUNT(*) FROM ({sql}) counted", params)
                total += cursor.fetchone()[0]
        return total


@contextmanager
def reads() -> Iterator[Reads]:
    seen = Reads()
    with connection.execute_wrapper(seen):
        yield seen


# --- a long log, fast --------------------------------------------------------------------


def bulk_log(project: Project, size: int) -> None:
    """``size`` records: the first through the real append path, the rest chained the way it
    chains them (the same payload and hash, texts stored once each) and inserted in bulk, then
    the head moved to the last one: a valid chain the verifier accepts."""
    first = append(project, 0)
    texts = [f"SESSION_CONTEXT: bulk text {n}" for n in range(TEXTS)]
    DeliveredText.objects.bulk_create(
        [DeliveredText(sha256=sha256_text(t), text=t, stored_at=utcnow()) for t in texts],
        ignore_conflicts=True,
    )
    start = utcnow() - timedelta(days=1)
    previous, rows = first.record_hash, []
    for seq in range(2, size + 1):
        at = start + timedelta(seconds=seq)
        row = InjectionRecord(
            seq=seq,
            format=RECORD_FORMAT,
            project=project,
            source="plan",
            channel="rest",
            client=f"api_key:k{seq % 7} (agent)",
            status="injected",
            decision="PASS",
            trust_score=0.8,
            threshold=0.75,
            mode="auto",
            trace_ids=[f"t{seq}"],
            request={"query": f"q{seq}"},
            items=[{"kind": "fact", "id": f"fact_{seq}", "sha256": "a" * 64}],
            prompt_sha256=sha256_text(texts[seq % TEXTS]),
            generated_at=at,
            created_at=at,
            prev_hash=previous,
        )
        row.record_hash = previous = record_hash(record_payload(row))
        rows.append(row)
    InjectionRecord.objects.bulk_create(rows, batch_size=2000)
    set_head(size, previous)


def timed(get: Callable[[], Any]) -> tuple[Any, float]:
    began = time.perf_counter()
    response = get()
    return response, time.perf_counter() - began


def test_the_banner_checks_a_bounded_range_of_a_long_log_and_says_which(
    staff, default_project, keyed, capsys
):
    bulk_log(default_project, SIZE)

    # No checkpoint: only the newest records are read, and the banner says so.
    with reads() as seen:
        status = chain_status()
    assert (status.verified, status.scope, status.checked) == (True, "window", RECENT_WINDOW)
    assert status.first_seq == SIZE - RECENT_WINDOW + 1 and status.head_seq == SIZE
    assert seen.queries <= 12, seen.statements
    assert seen.rows() <= RECENT_WINDOW + 2 * TEXTS + 50
    staff.get(LIST)  # the first request of a process loads templates: not what is measured
    page, list_seconds = timed(lambda: staff.get(LIST))
    chain, chain_seconds = timed(lambda: staff.get(CHAIN))
    assert 'data-scope="window"' in chain.content.decode()
    text = page.content.decode()
    assert page.status_code == 200 and 'data-scope="window"' in text
    assert f"last {RECENT_WINDOW:,} records checked (seq {SIZE - RECENT_WINDOW + 1} to head" in text
    assert f"the {SIZE - RECENT_WINDOW:,} records before them were not checked here" in text
    assert "create a checkpoint with manage.py audit_checkpoint" in text
    assert "none on record: run manage.py injection_log_verify (cron)" in text

    # Tampering inside the window is named; before it, the banner never claimed to look.
    inside, before = SIZE - RECENT_WINDOW // 2, SIZE - RECENT_WINDOW - 10
    edit(inside, client="someone else")
    assert chain_status().broken_seq == inside
    edit(inside, client=f"api_key:k{inside % 7} (agent)")
    edit(before, client="someone else")
    assert chain_status().verified and injection_log_verify().first_broken.seq == before
    edit(before, client=f"api_key:k{before % 7} (agent)")

    # A checkpoint (signed after a full verification), then more records the real way.
    began = time.perf_counter()
    checkpoint = audit_checkpoint_create()
    full_seconds = time.perf_counter() - began
    for n in range(1, AFTER + 1):
        append(default_project, n)
    with reads() as seen:
        status = chain_status()
    assert (status.verified, status.scope) == (True, "checkpoint")
    assert status.checked == AFTER + 1  # the checkpointed record and every one after it
    assert (status.first_seq, status.head_seq) == (SIZE, SIZE + AFTER)
    assert seen.queries <= 12, seen.statements
    assert seen.rows() <= 3 * (AFTER + 1) + 2 * TEXTS
    page, list_seconds_cp = timed(lambda: staff.get(LIST))
    text = page.content.decode()
    assert 'data-scope="checkpoint"' in text and 'data-verified="true"' in text
    assert f"verified from checkpoint #{checkpoint.id} (seq {SIZE}, 0\xa0minutes old) to head " in (
        text
    )
    assert f"seq {SIZE + AFTER}: {AFTER + 1:,} records checked" in text
    assert f"passed through seq {SIZE} when checkpoint #{checkpoint.id} was signed" in text
    chain, chain_seconds_cp = timed(lambda: staff.get(CHAIN))
    assert f"verified from checkpoint #{checkpoint.id} (seq {SIZE}" in chain.content.decode()

    # Inside the checked range, tampering is named at its seq on both pages.
    edit(SIZE + 100, client="someone else")
    for url in (LIST, CHAIN):
        broken = staff.get(url).content.decode()
        assert 'data-verified="false"' in broken and f"broken at seq {SIZE + 100}" in broken
    # The checkpointed record rewritten with its hash recomputed: the checkpoint names it.
    edit(SIZE + 100, client=f"api_key:k{AFTER // 2} (agent)")
    assert chain_status().verified
    edit(SIZE, client="someone else")
    edit(SIZE, record_hash=record_hash(record_payload(record(SIZE))))
    status = chain_status()
    assert status.broken_seq == SIZE and not status.verified
    assert status.checked_range.startswith(f"checked from checkpoint #{checkpoint.id} (seq {SIZE}")
    with capsys.disabled():
        print(
            f"\n[chain status at {SIZE + AFTER:,} records] list page {list_seconds:.2f}s "
            f"(window) / {list_seconds_cp:.2f}s (checkpoint), dashboard chain "
            f"{chain_seconds:.2f}s / {chain_seconds_cp:.2f}s, full verification "
            f"{full_seconds:.2f}s"
        )


# --- the edges, on short logs ----------------------------------------------------------------


def test_a_short_log_is_verified_in_full_and_says_so(default_project):
    build_log(default_project, 5)
    status = chain_status()
    assert (status.verified, status.scope, status.checked, status.first_seq) == (
        True,
        "full",
        5,
        1,
    )
    assert status.checked_range == "all 5 records checked, from genesis to head seq 5"
    edit(4, client="someone else")
    status = chain_status()
    assert (status.verified, status.broken_seq) == (False, 4)
    assert status.checked_range == "checked from genesis to head seq 5: 3 records verified"


def test_the_window_names_tampering_inside_it_and_claims_nothing_before(default_project):
    build_log(default_project, 30)
    recent = injection_log_verify_recent(window=10)
    assert (recent.scope, recent.first_seq, recent.verification.checked) == ("window", 21, 10)
    assert recent.unverified == 20
    edit(5, client="someone else")
    assert injection_log_verify_recent(window=10).verification.ok  # not read
    assert injection_log_verify().first_broken.seq == 5  # the full verification still names it
    edit(25, client="someone else")
    assert injection_log_verify_recent(window=10).verification.first_broken.seq == 25


def test_records_missing_inside_the_window_are_named(default_project):
    build_log(default_project, 30)
    delete(24, 25)
    broken = injection_log_verify_recent(window=10).verification.first_broken
    assert (broken.kind, broken.seq) == ("gap", 26)
    assert "records 24-25 are missing" in broken.reason


def test_a_head_set_back_behind_the_checkpoint_breaks_the_status(default_project, keyed):
    build_log(default_project, 8)
    audit_checkpoint_create()
    append(default_project, 9)
    set_head(7, record(7).record_hash)
    status = chain_status()
    assert not status.verified and status.broken_seq == 8


def test_a_truncated_tail_after_the_checkpoint_is_named(default_project, keyed):
    build_log(default_project, 8)
    audit_checkpoint_create()
    delete(7, 8)
    set_head(6, record(6).record_hash)
    status = chain_status()
    assert not status.verified and status.broken_seq == 7
    assert "checkpoint" in status.broken_reason and "records 7-8 are missing" in (
        status.broken_reason
    )


def test_a_checkpoint_whose_signature_fails_is_not_used_and_says_so(default_project, keyed):
    build_log(default_project, 6)
    checkpoint = audit_checkpoint_create()
    with audit_maintenance():
        AuditCheckpoint.objects.filter(pk=checkpoint.id).update(mac="0" * 64)
    status = chain_status()
    assert not status.verified and status.scope == "full" and status.checked == 6
    assert status.checkpoint is not None and not status.checkpoint.signature_ok
    assert status.full_verification.startswith("none on record")


def test_without_the_key_the_checkpoint_is_not_trusted_and_the_log_is_read(
    default_project, keyed, settings
):
    build_log(default_project, 6)
    audit_checkpoint_create()
    settings.AUDIT_CHECKPOINT_KEY = ""
    status = chain_status()
    assert status.verified and status.scope == "full" and status.checked == 6
    assert any("stored checkpoints were not checked" in w for w in status.warnings)
