"""Where a project's graph stands: its head, the one GraphRevision row every write through the
services moves in the write's transaction (the revision the write stamps its rows with, the
change log's size and the hash of its last entry). Caches, the compiler's index, integrity
verification, its worker and checkpoints all read it through ``graph_head``; two reads that
find the same head read the same graph.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from graph_app.models import GraphChange, GraphRevision
from graph_app.snapshot import GraphHead
from memoryproject import sql
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.models import Project


@cache
def _head_sql() -> str:
    return (
        f"SELECT {sql.columns(GraphRevision, ('revision', 'changes', 'head_hash'))} "
        f"FROM {sql.table(GraphRevision)} WHERE {sql.column(GraphRevision, 'project')} = %s"
    )


@cache
def _log_holds_sql() -> str:
    project, seq, digest = (sql.column(GraphChange, f) for f in ("project", "seq", "hash"))
    return (
        f"SELECT 1 FROM {sql.table(GraphChange)} "
        f"WHERE {project} = %s AND {seq} = %s AND {digest} = %s"
    )


def graph_head_statement(project: Project) -> tuple[str, list[Any]]:
    """The statement ``graph_head`` runs and its parameters (for a reader on a connection of
    its own: it answers no row before the project's first write)."""
    return _head_sql(), [project.pk]


def graph_head(project: Project) -> GraphHead:
    """The project's graph head; revision 0, an empty log and the genesis hash before its
    first write. One row by its unique key, read on every compile and entity query."""
    rows = sql.fetch(*graph_head_statement(project))
    if not rows:
        return GraphHead(revision=0, changes=0, head_hash=GENESIS_HASH)
    revision, changes, head_hash = rows[0]
    return GraphHead(revision=int(revision), changes=int(changes), head_hash=str(head_hash))


def graph_log_holds(project: Project, changes: int, head_hash: str) -> bool:
    """Whether the project's change log still holds ``head_hash`` as its entry ``changes``
    (an empty log's head, ``changes`` 0, it always holds): a head read earlier that the graph
    went on from, not one it went back from (a restored backup, a rolled-back write)."""
    if changes == 0:
        return True
    # Read after every write by each process's caches: a statement made once, not the ORM's.
    return bool(sql.fetch(_log_holds_sql(), [project.pk, changes, head_hash]))


def graph_head_continues(*, project: Project, head: GraphHead, current: GraphHead) -> bool:
    """Whether ``current`` (the project's head now) continues the history ``head`` described:
    the same head, or a later one whose log still holds ``head``'s last change. False after
    the graph went back (a restored backup, a rolled-back write) even if it moved on since."""
    if current.revision < head.revision or current.changes < head.changes:
        return False
    if current.revision == head.revision or current.changes == head.changes:
        return current.changes == head.changes and current.head_hash == head.head_hash
    return graph_log_holds(project, head.changes, head.head_hash)


def graph_head_reached(*, project: Project, head: GraphHead) -> bool:
    """Whether the project's graph holds the history ``head`` describes, as it is or moved on
    from it: the same revision with the same log head, or a later revision whose log holds
    ``head.head_hash`` at ``head.changes``. An empty log proves nothing: answers False."""
    current = graph_head(project)
    return head.changes > 0 and graph_head_continues(project=project, head=head, current=current)
