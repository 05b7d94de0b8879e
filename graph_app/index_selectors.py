"""Reads that load the context compiler's search index: plain rows, not model instances.

The compiler keeps a per-project index in memory and refreshes it with what changed since the
revision it last saw (see ``graph_app.compiler``). These selectors fetch those rows with
``.values()`` and in chunks: building an index over 100,000 facts is dominated by model
instantiation otherwise. Rows carry the columns every read of a fact or an episode uses
(``selectors.FACT_VALUE_FIELDS``, ``selectors.EPISODE_VALUE_FIELDS``) plus, for facts, the
names the index searches on. ``graph_head_*`` tell whether a stored snapshot of the index
still describes the project's graph (``graph_app.snapshot``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from graph_app.models import Episode, GraphChange, GraphRevision, TemporalFact
from graph_app.models.changes import GENESIS_HASH
from graph_app.selectors import EPISODE_VALUE_FIELDS, FACT_VALUE_FIELDS
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
    """Where the project's graph stands: revision, change log size and head hash (one row)."""
    row = (
        GraphRevision.objects.filter(project=project)
        .values_list("revision", "changes", "head_hash")
        .first()
    )
    if row is None:
        return GraphHead(revision=0, changes=0, head_hash=GENESIS_HASH)
    return GraphHead(revision=int(row[0]), changes=int(row[1]), head_hash=str(row[2]))


def graph_head_reached(*, project: Project, head: GraphHead) -> bool:
    """Whether the project's graph holds the history ``head`` describes, as it is or moved on
    from it: the same revision with the same log head, or a later revision whose log holds
    ``head.head_hash`` at ``head.changes``. An empty log proves nothing: answers False."""
    current = graph_head_current(project=project)
    if head.changes <= 0 or current.revision < head.revision or current.changes < head.changes:
        return False
    if current.revision == head.revision:
        return current.changes == head.changes and current.head_hash == head.head_hash
    hashes = GraphChange.objects.filter(project=project, seq=head.changes).values_list(
        "hash", flat=True
    )
    return list(hashes) == [head.head_hash]
