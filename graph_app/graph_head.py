"""Where a project's graph stands: its revision and the size and head hash of its change log (the
one GraphRevision row every write through the services moves), and the change log's last entry
as a checkpoint records it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db.models import QuerySet

from graph_app.models import GraphChange, GraphRevision
from memoryproject import sql
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.models import Project


def graph_revision_current(*, project: Project) -> int:
    """The project's graph revision: 0 before its first write."""
    row = GraphRevision.objects.filter(project=project).values_list("revision", flat=True).first()
    return int(row or 0)


@cache
def _head_sql() -> str:
    return (
        f"SELECT {sql.columns(GraphRevision, ('revision', 'changes', 'head_hash'))} "
        f"FROM {sql.table(GraphRevision)} WHERE {sql.column(GraphRevision, 'project')} = %s"
    )


def graph_head_row(project: Project) -> tuple[int, int, str]:
    """Where the project's graph stands: (revision, change log size, head hash); (0, 0, the
    genesis hash) before its first write. One row, read on every compile and entity query."""
    rows = sql.fetch(_head_sql(), [project.pk])
    if not rows:
        return 0, 0, GENESIS_HASH
    revision, changes, head_hash = rows[0]
    return int(revision), int(changes), str(head_hash)


def graph_head_values(project: Project) -> QuerySet[Any]:
    """The project's graph head: (revision, changes, head hash). Every write through the
    services moves it, so two reads that find the same head read the same graph."""
    return GraphRevision.objects.filter(project=project).values_list(
        "revision", "changes", "head_hash"
    )


def graph_chain_head(project: Project) -> tuple[int, str]:
    """The project's graph change log as a checkpoint records it: (size, hash of the last
    entry); (0, the genesis hash) before its first write."""
    last = (
        GraphChange.objects.filter(project=project)
        .order_by("-seq")
        .values_list("seq", "hash")
        .first()
    )
    return (int(last[0]), str(last[1])) if last else (0, GENESIS_HASH)
