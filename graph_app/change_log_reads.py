"""The graph's change log replayed: its entries read raw in seq order and verified as a hash
chain (graph_app.domain.sealing) against the graph head and, when given, a checkpoint; from the
start, or from a checkpoint's entry on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from django.db import connection

from graph_app.domain.sealing import (
    ChainReport,
    ChangeEntry,
    chain_verify,
    checkpoint_verify,
    head_verify,
)
from graph_app.graph_head import graph_head
from graph_app.models import GraphChange
from graph_app.raw_rows import READ_CHUNK, times_as_text
from memoryproject.domain.instants import utc_text
from memoryproject.models import Project

#: The columns of a change log entry, in the order of graph_app.domain.sealing.ChangeEntry.
CHANGE_FIELDS = (
    "seq",
    "revision",
    "action",
    "record_type",
    "record_id",
    "record_sha256",
    "erased_sha256",
    "note",
    "recorded_at",
    "prev_hash",
    "hash",
)


def _change_entries(project: Project, from_seq: int = 0) -> Iterator[ChangeEntry]:
    """The project's change log in seq order (from ``from_seq`` on), read by one raw statement
    through the (project, seq) index: verification reads every entry, and the ORM's per-row
    conversions would cost more than hashing them."""
    table = GraphChange._meta.db_table
    columns = ", ".join(f'"{table}"."{name}"' for name in CHANGE_FIELDS)
    sql = (
        f'SELECT {columns} FROM "{table}" WHERE "{table}"."project_id" = %s '
        f'AND "{table}"."seq" >= %s ORDER BY 1, "id"'
    )
    with connection.chunked_cursor() as cursor:
        cursor.execute(times_as_text(sql, GraphChange, ("recorded_at",)), [project.pk, from_seq])
        # The entries one write appends share its time: each stored text is read once.
        stored, at = None, None
        while rows := cursor.fetchmany(READ_CHUNK):
            for row in rows:
                if row[8] != stored:
                    stored, at = row[8], utc_text(row[8])
                yield ChangeEntry._make((*row[:8], at, row[9], row[10]))


def chain_read(
    project: Project, checkpoint: tuple[int, str] | None, *, since: bool = False
) -> tuple[ChainReport, int]:
    """Replays the project's change log: the chain, its head and the checkpoint; answers it
    with the project's revision. ``since``: only from the checkpoint's entry on, chained from
    that entry's link (the entries before it are not read)."""
    watch = checkpoint[0] if checkpoint else None
    report = None
    if since and checkpoint is not None and checkpoint[0] > 0:
        entries = _change_entries(project, from_seq=checkpoint[0])
        first = next(entries, None)
        if first is not None and first.seq == checkpoint[0]:
            # Chained from where the checkpointed entry links to: it is verified itself.
            report = chain_verify(
                itertools.chain([first], entries),
                project=project.slug,
                watch=watch,
                start=(first.seq - 1, first.prev_hash),
            )
        # Without its entry the checkpoint cannot anchor anything: the whole log is read,
        # so that its problems are named as a full verification names them.
    if report is None:
        report = chain_verify(_change_entries(project), project=project.slug, watch=watch)
    head = graph_head(project)
    head_verify(report, size=head.changes, head=head.head_hash)
    if checkpoint is not None:
        checkpoint_verify(report, size=checkpoint[0], head=checkpoint[1])
    return report, head.revision
