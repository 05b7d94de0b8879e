"""Reads that load the context compiler's search index: plain rows, not model instances.

The compiler keeps a per-project index in memory and refreshes it with what changed since the
revision it last saw (see ``graph_app.compiler``). These selectors fetch those rows with
``.values()`` and in chunks: building an index over 100,000 facts is dominated by model
instantiation otherwise. Rows carry the columns every read of a fact or an episode uses
(``record_canonical.FACT_VALUE_FIELDS``, ``record_canonical.EPISODE_VALUE_FIELDS``) plus, for
facts, the names the index searches on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from graph_app.models import Episode, TemporalFact
from graph_app.record_canonical import EPISODE_VALUE_FIELDS, FACT_VALUE_FIELDS
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
