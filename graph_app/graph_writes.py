"""The transaction of a graph write: the project's graph lock, its revision and the change log
entries the write appends.

Each write (``graph_app.fact_writes``, ``episode_writes``, ``entity_writes``,
``record_erasure``) runs in one transaction that first takes the project's graph lock (its
GraphRevision row), bumps the revision and stamps every row it creates or changes with it. The
lock serialises writers of one project, so concurrent upserts of a singular predicate form one
linear supersession chain; the partial unique constraint on active singular facts is the
database's last word if anything bypasses it.

Every write also appends, before it commits, one entry per record it created or changed to the
project's hash-chained change log (``graph_app.models.changes``): ``graph_write`` opens the
transaction, takes the lock and seals the entries.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import IntegrityError, connection, transaction

from graph_app.change_log_reads import CHANGE_FIELDS
from graph_app.domain.records import change_hash
from graph_app.models import ChangeAction, GraphChange, GraphRevision, RecordType
from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from memoryproject.witness import graph_stream, witness_head_advance
from memoryproject.writes import after_turn, write_transaction


def _graph_lock(project: Project) -> tuple[int, int, str]:
    """Bumps the project's graph revision and answers it with the change log's head (size,
    last hash). The UPDATE takes the row lock of the project's GraphRevision (created on first
    use) and holds it until the transaction ends: this is the lock that serialises the
    project's graph writers, so call it first, before reading what the write depends on."""
    table = GraphRevision._meta.db_table
    bump = f"UPDATE {table} SET revision = revision + 1 WHERE project_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(bump, [project.pk])
        if cursor.rowcount == 0:
            try:
                with transaction.atomic():
                    GraphRevision.objects.create(project=project, revision=0)
            except IntegrityError:
                pass  # another writer created it first; the UPDATE below waits for its lock
            cursor.execute(bump, [project.pk])
        cursor.execute(
            f"SELECT revision, changes, head_hash FROM {table} WHERE project_id = %s",
            [project.pk],
        )
        row = cursor.fetchone()
    return int(row[0]), int(row[1]), str(row[2])


#: The change log's columns a write inserts, in order.
_CHANGE_COLUMNS = ("project_id", *CHANGE_FIELDS)


@dataclass
class GraphWrite:
    """A graph write in progress: its revision, and the change log entries it appends (each
    chained to the one before), inserted together when the write seals."""

    project: Project
    revision: int
    size: int
    head: str
    now: datetime
    pending: list[tuple[Any, ...]] = field(default_factory=list)

    def append(
        self,
        action: ChangeAction,
        record_type: RecordType,
        record_id: str,
        record_sha256: str,
        *,
        erased_sha256: str = "",
        note: str = "",
    ) -> str:
        """Chains an entry (``record_sha256`` is the record's hash after this change);
        answers its hash."""
        entry = (
            self.size + 1,
            self.revision,
            action.value,
            record_type.value,
            record_id,
            record_sha256,
            erased_sha256,
            note,
            self.now,
            self.head,
        )
        digest = change_hash(self.project.slug, *entry)
        self.pending.append((self.project.pk, *entry, digest))
        self.size, self.head = self.size + 1, digest
        return digest

    def seal(self) -> None:
        """Inserts the pending entries and moves the head (two statements whatever their
        number); nothing when none were appended. Entries are plain rows: the log's model
        only ever reads them."""
        if not self.pending:
            return
        at = connection.ops.adapt_datetimefield_value(self.now)
        rows = [(*entry[:9], at, *entry[10:]) for entry in self.pending]
        self.pending = []
        changes, head = GraphChange._meta.db_table, GraphRevision._meta.db_table
        columns = ", ".join(_CHANGE_COLUMNS)
        row = "(" + ", ".join(["%s"] * len(_CHANGE_COLUMNS)) + ")"
        with connection.cursor() as cursor:
            for start in range(0, len(rows), _INSERT_BATCH):
                batch = rows[start : start + _INSERT_BATCH]
                values = ", ".join([row] * len(batch))
                params = [value for entry in batch for value in entry]
                cursor.execute(f"INSERT INTO {changes} ({columns}) VALUES {values}", params)
            cursor.execute(
                f"UPDATE {head} SET changes = %s, head_hash = %s WHERE project_id = %s",
                [self.size, self.head, self.project.pk],
            )
        # Witnessed once committed (a rolled-back head must never be witnessed;
        # the next writer need not wait for it: a head only moves forward).
        after_turn(
            partial(
                witness_head_advance,
                graph_stream(self.project.pk),
                self.size,
                self.head,
                project=self.project.slug,
            )
        )


#: Entries per INSERT statement (12 parameters each: within SQLite's and PostgreSQL's limits).
_INSERT_BATCH = 500


@contextmanager
def graph_write(project: Project) -> Iterator[GraphWrite]:
    """The transaction of one graph write: takes the project's graph lock (bumping its
    revision) and, when the body ends without an error, seals the change log entries it
    appended, before the commit."""
    with write_transaction():
        revision, size, head = _graph_lock(project)
        write = GraphWrite(project=project, revision=revision, size=size, head=head, now=utcnow())
        yield write
        write.seal()


def record_id_new(prefix: str) -> str:
    """A new record's id: ``prefix`` and 16 random hex digits (fact_..., ep_...)."""
    return f"{prefix}_{secrets.token_hex(8)}"
