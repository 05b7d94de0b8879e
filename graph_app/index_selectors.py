"""Reads that load the context compiler's search index: plain rows, not model instances.

The compiler keeps a per-project index in memory and refreshes it with what changed since the
revision it last saw (see ``graph_app.compiler``). These selectors fetch those rows with
``.values()`` and in chunks: building an index over 100,000 facts is dominated by model
instantiation otherwise. Rows carry the columns every read of a fact or an episode uses
(``record_canonical.FACT_VALUE_FIELDS``, ``record_canonical.EPISODE_VALUE_FIELDS``) plus, for
facts, the names the index searches on. ``graph_head_*`` tell whether a stored snapshot of the index
still describes the project's graph (``graph_app.snapshot``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from graph_app.graph_head import graph_head_row
from graph_app.models import Episode, GraphChange, TemporalFact
from graph_app.record_canonical import EPISODE_VALUE_FIELDS, FACT_VALUE_FIELDS
from graph_app.snapshot import GraphHead
from memoryproject.models import Project

#: A fact's columns for the index: its values, and the subject's name and source episode's
#: title, which a query may use to find it.
INDEX_FACT_FIELDS = (*FACT_VALUE_FIELDS, "subject__name", "source_episode__title")
#: An episode's columns for the index: its values (its text, files, entities and stream) and
#: its content hash, which receipts of the bundles that cite it record.
INDEX_EPISODE_FIELDS = (*EPISODE_VALUE_FIELDS, "sha256")
CHUNK_ROWS = 5000


def _rows_changed_since(
    rows: QuerySet[Any], fields: tuple[str, ...], revision: int
) -> Iterator[dict[str, Any]]:
    return (
        rows.filter(revision__gt=revision)
        .order_by("revision", "id")
        .values(*fields)
        .iterator(chunk_size=CHUNK_ROWS)
    )


def fact_rows_changed_since(*, project: Project, revision: int) -> Iterator[dict[str, Any]]:
    """The facts created or changed after ``revision``, oldest change first, as plain rows."""
    facts = TemporalFact.objects.filter(project=project)
    return _rows_changed_since(facts, INDEX_FACT_FIELDS, revision)


def episode_rows_changed_since(*, project: Project, revision: int) -> Iterator[dict[str, Any]]:
    """The episodes recorded after ``revision``, oldest first, as plain rows."""
    episodes = Episode.objects.filter(project=project)
    return _rows_changed_since(episodes, INDEX_EPISODE_FIELDS, revision)


def graph_head_current(*, project: Project) -> GraphHead:
    """Where the project's graph stands: revision, change log size and head hash (one row,
    read on every compile)."""
    revision, changes, head_hash = graph_head_row(project)
    return GraphHead(revision=revision, changes=changes, head_hash=head_hash)


def graph_head_continues(*, project: Project, head: GraphHead, current: GraphHead) -> bool:
    """Whether ``current`` (the project's head now) continues the history ``head`` described:
    the same head, or a later one whose log still holds ``head``'s last change. False after
    the graph went back (a restored backup, a rolled-back write) even if it moved on since."""
    if current.revision < head.revision or current.changes < head.changes:
        return False
    if current.revision == head.revision or current.changes == head.changes:
        return current.changes == head.changes and current.head_hash == head.head_hash
    if head.changes == 0:
        return True
    hashes = GraphChange.objects.filter(project=project, seq=head.changes).values_list(
        "hash", flat=True
    )
    return list(hashes) == [head.head_hash]


def graph_head_reached(*, project: Project, head: GraphHead) -> bool:
    """Whether the project's graph holds the history ``head`` describes, as it is or moved on
    from it: the same revision with the same log head, or a later revision whose log holds
    ``head.head_hash`` at ``head.changes``. An empty log proves nothing: answers False."""
    current = graph_head_current(project=project)
    return head.changes > 0 and graph_head_continues(project=project, head=head, current=current)
