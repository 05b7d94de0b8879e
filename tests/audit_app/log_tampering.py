"""Helpers of the audit tests: a small log, the edits an attacker with database access would
make behind the application's back (through the maintenance gate, or with constraints
dropped, never through the services), and running the audit commands."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

from django.core.management import call_command
from django.db import connection

from audit_app.domain.chain import EMPTY_TEXT_SHA256, RECORD_FORMAT, record_hash
from audit_app.injection_log import injection_log_append
from audit_app.models import (
    DeliveredText,
    InjectionLogHead,
    InjectionRecord,
    audit_maintenance,
    record_payload,
)
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

KEY = "test-checkpoint-key-0123456789abcdef0123456789"
TABLE = InjectionRecord._meta.db_table


def run(*args: str) -> tuple[int, str, str]:
    """Runs a management command: its exit status, stdout and stderr."""
    out, err = StringIO(), StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exit_info:
        return int(exit_info.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def append(project: Project, n: int, **overrides: Any) -> InjectionRecord:
    fields: dict[str, Any] = {
        "project": project,
        "channel": "rest",
        "client": f"api_key:k{n} (agent)",
        "status": "injected",
        "decision": "PASS",
        "trust_score": 0.5 + n / 100,
        "threshold": 0.75,
        "mode": "auto",
        "trace_ids": [f"t{n}", f"t{n + 1}"],
        "system_prompt": f"SESSION_CONTEXT: record {n}",
        "generated_at": utcnow(),
        "source": "compile",
        "request": {"query": f"q{n}", "max_tokens": 800 + n, "known_at": None},
        "items": [{"kind": "fact", "id": f"fact_{n}", "sha256": f"{n % 10}" * 64}],
    }
    fields.update(overrides)
    return injection_log_append(**fields)


def build_log(project: Project, size: int) -> list[InjectionRecord]:
    return [append(project, n) for n in range(1, size + 1)]


def record(seq: int) -> InjectionRecord:
    return InjectionRecord.objects.get(seq=seq)


def edit(at: int, /, **values: Any) -> None:
    with audit_maintenance():
        InjectionRecord.objects.filter(seq=at).update(**values)


def rehash(seq: int) -> str:
    """Recomputes the stored record_hash of ``seq`` from its fields (as a forger would)."""
    found = record(seq)
    digest = record_hash(record_payload(found))
    edit(seq, record_hash=digest)
    return digest


def rechain(first: int, *, move_head: bool = True) -> None:
    """Relinks every record from ``first`` on to the one before and rehashes it."""
    previous = record(first - 1).record_hash if first > 1 else GENESIS_HASH
    for seq in (
        InjectionRecord.objects.filter(seq__gte=first).order_by("seq").values_list("seq", flat=True)
    ):
        edit(seq, prev_hash=previous)
        previous = rehash(seq)
    if move_head:
        set_head(InjectionLogHead.objects.get().seq, previous)


def set_head(seq: int, last_hash: str) -> None:
    with audit_maintenance():
        InjectionLogHead.objects.filter(pk=1).update(seq=seq, last_hash=last_hash)


def delete(*seqs: int) -> None:
    """Raw DELETE, as SQL behind the application's back would (no ORM collector)."""
    marks = ", ".join(["%s"] * len(seqs))
    with audit_maintenance(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE seq IN ({marks})", list(seqs))


def swap(first: int, second: int) -> None:
    """Exchanges the positions of two records (their seqs)."""
    with audit_maintenance():
        parked = 10**9
        InjectionRecord.objects.filter(seq=first).update(seq=parked)
        InjectionRecord.objects.filter(seq=second).update(seq=first)
        InjectionRecord.objects.filter(seq=parked).update(seq=second)


def forged(seq: int, prev_hash: str, *, pk: int | None = None, **overrides: Any) -> InjectionRecord:
    """A record with a correctly computed hash, written straight to the table."""
    fake = InjectionRecord(
        pk=pk,
        seq=seq,
        format=RECORD_FORMAT,
        project=Project.objects.get(slug="default"),
        source="plan",
        channel="rest",
        client="forged",
        status="injected",
        decision="PASS",
        trust_score=0.99,
        threshold=0.75,
        mode="force",
        trace_ids=["t-forged"],
        request={"query": "forged"},
        items=[],
        prompt_sha256=EMPTY_TEXT_SHA256,
        generated_at=utcnow(),
        created_at=utcnow(),
        prev_hash=prev_hash,
    )
    for name, value in overrides.items():
        setattr(fake, name, value)
    fake.record_hash = record_hash(record_payload(fake))
    fake.save(force_insert=True)
    return fake


def copy_row(seq: int) -> InjectionRecord:
    """A second row identical to record ``seq`` but for its id (unique constraints dropped)."""
    original = record(seq)
    new_id = max(InjectionRecord.objects.values_list("pk", flat=True)) + 1
    original.pk = new_id
    original._state.adding = True
    original.save(force_insert=True)
    return original


def drop_unique_constraints() -> None:
    """Removes the unique constraints on seq and record_hash (on SQLite by rebuilding the
    table, after dropping the log's triggers) inside the test's transaction, which rolls it
    all back."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Deferred foreign key checks of this transaction's inserts block an ALTER TABLE.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'u'",
                [TABLE],
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'ALTER TABLE {TABLE} DROP CONSTRAINT "{name}"')
            return
        # The head's trigger reads the table: it goes too (the rollback restores them all).
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        for (name,) in cursor.fetchall():
            if name.startswith("audit_app_"):
                cursor.execute(f"DROP TRIGGER {name}")
        cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [TABLE])
        create = cursor.fetchone()[0].replace(" UNIQUE", "").replace(TABLE, "tampered", 1)
        cursor.execute(create)
        cursor.execute(f"INSERT INTO tampered SELECT * FROM {TABLE}")
        cursor.execute(f"DROP TABLE {TABLE}")
        cursor.execute(f"ALTER TABLE tampered RENAME TO {TABLE}")


def flip(value: Any) -> Any:
    """``value`` with one byte (or the smallest step) changed."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, datetime):
        return value + timedelta(microseconds=1)
    if isinstance(value, int):
        return value ^ 1
    if isinstance(value, float):
        return math.nextafter(value, math.inf)
    if isinstance(value, str):
        if not value:
            return "x"
        return chr(ord(value[0]) ^ 1) + value[1:]
    if isinstance(value, list):
        return [flip(value[0]), *value[1:]] if value else ["x"]
    if isinstance(value, dict):
        if not value:
            return {"x": 1}
        key = sorted(value)[0]
        return {**value, key: flip(value[key]) if value[key] is not None else "x"}
    raise TypeError(type(value))


def flip_text(seq: int) -> None:
    digest = record(seq).prompt_sha256
    with audit_maintenance():
        text = DeliveredText.objects.get(sha256=digest).text
        DeliveredText.objects.filter(sha256=digest).update(text=flip(text))
