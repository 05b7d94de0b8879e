"""The leaves of the graph's Merkle tree: each fact's and episode's canonical JSON (facts by id,
then episodes by id) with its stored hash and revision, read raw: integrity verification hashes
them, inclusion proofs are built over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from graph_app.domain.records import fact_rows_leaves
from graph_app.graph_head import graph_head
from graph_app.models import Episode, TemporalFact
from graph_app.raw_rows import READ_CHUNK, times_as_text
from graph_app.record_canonical import (
    EPISODE_VALUE_FIELDS,
    FACT_TIMES,
    FACT_VALUE_FIELDS,
    episode_canonical_of,
)
from memoryproject.collector import collector_paused
from memoryproject.domain.canonical import canonical_json
from memoryproject.models import Project
from memoryproject.reads import read_snapshot


def fact_leaves(
    project: Project, ids: list[str] | None = None
) -> Iterator[tuple[str, str, int, bytes]]:
    """(id, stored hash, revision, canonical JSON) of the project's facts in Merkle leaf order
    (by id); ``ids``: only those. Read raw, instants straight into their canonical text:
    verification reads every fact, and per-row conversions would cost more than hashing."""
    sql, params = fact_statement(project, ids)
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(READ_CHUNK):
            yield from fact_rows_leaves(chunk, project.slug)


def fact_statement(project: Project, ids: list[str] | None = None) -> tuple[str, Sequence[Any]]:
    """The statement ``fact_leaves`` reads the facts with (rows for ``fact_rows_leaves``)."""
    rows = TemporalFact.objects.filter(project=project).order_by("id")
    if ids is not None:
        rows = rows.filter(id__in=ids)
    sql, params = rows.values_list(*FACT_VALUE_FIELDS, "revision").query.sql_with_params()
    return times_as_text(sql, TemporalFact, FACT_TIMES), params


def episode_value_rows(project: Project, ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The project's episodes in Merkle leaf order (by id, after every fact); ``ids``: only
    those."""
    rows = Episode.objects.filter(project=project).order_by("id")
    if ids is not None:
        rows = rows.filter(id__in=ids)
    return list(rows.values(*EPISODE_VALUE_FIELDS, "sha256", "revision"))


def episode_leaves(
    rows: Iterable[Mapping[str, Any]], project_slug: str
) -> Iterator[tuple[str, str, int, bytes]]:
    """(id, stored hash, revision, canonical JSON) of each episode row."""
    for row in rows:
        data = canonical_json(episode_canonical_of(row, project_slug))
        yield row["id"], row["sha256"], row["revision"], data


@dataclass(frozen=True)
class GraphLeaves:
    """The leaves of the graph's Merkle tree (the root integrity verification computes): each
    record's canonical JSON, facts by id then episodes by id, with its (kind, id)."""

    keys: list[tuple[str, str]]
    leaves: list[bytes]
    revision: int


def graph_leaves(*, project: Project) -> GraphLeaves:
    """Every record's Merkle leaf, read in one consistent snapshot (for inclusion proofs)."""
    keys: list[tuple[str, str]] = []
    leaves: list[bytes] = []
    with read_snapshot(), collector_paused():
        revision = graph_head(project).revision
        for kind, records in (
            ("fact", fact_leaves(project)),
            ("episode", episode_leaves(episode_value_rows(project), project.slug)),
        ):
            for record_id, _, _, data in records:
                keys.append((kind, record_id))
                leaves.append(data)
    return GraphLeaves(keys=keys, leaves=leaves, revision=revision)
