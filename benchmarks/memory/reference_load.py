"""Loads a project's memory into the in-memory reference (``reference.py``): the same rows the
compiler's index reads (``graph_app.index_selectors``), the same indexed texts
(``graph_app.index_documents``), tokens and cited lines (``graph_app.domain.render``), so the two
rank and pack the same corpus."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from benchmarks.memory.reference import RefDoc, ReferenceIndex
from graph_app.domain.render import fact_line
from graph_app.domain.tokenize import occurrence_terms, tokenize
from graph_app.index_documents import (
    episode_row_line,
    episode_row_text,
    fact_row_status,
    fact_row_text,
)
from graph_app.index_selectors import episode_rows_changed_since, fact_rows_changed_since
from memoryproject.models import Project
from memoryproject.tokens import count_tokens


def _fact(row: dict[str, Any]) -> RefDoc:
    subject, obj = row["subject__slug"], row["object_entity__slug"]
    line, _, _ = fact_line(
        fact_id=row["id"],
        subject=subject,
        predicate=row["predicate"],
        object_value=row["object_value"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        status=fact_row_status(row),
        source_episode=row["source_episode_id"],
        sha256=row["sha256"],
    )
    text = fact_row_text(row)
    return RefDoc(
        key=f"fact:{row['id']}",
        tokens=tuple(tokenize(text)),
        entities=(subject.lower(),),
        edge=(subject.lower(), obj.lower()) if obj else None,
        line=line,
        live=row["closed_at"] is None and row["valid_until"] is None,
    )


def _episode(row: dict[str, Any]) -> RefDoc:
    files = [str(f) for f in row["files_touched"] or []]
    occurred: datetime = row["occurred_at"]
    line, _, _ = episode_row_line(row, files, occurred_at=occurred)
    text = episode_row_text(row, files)
    terms = occurrence_terms(occurred.year, occurred.month, occurred.day)
    return RefDoc(
        key=f"episode:{row['id']}",
        tokens=tuple(tokenize(text)) + tuple(terms),
        entities=tuple(str(e).lower() for e in row["entities_mentioned"] or []),
        edge=None,
        line=line,
        live=True,
    )


def _docs(project: Project) -> Iterator[RefDoc]:
    for row in episode_rows_changed_since(project=project, revision=0):
        yield _episode(row)
    for row in fact_rows_changed_since(project=project, revision=0):
        yield _fact(row)


def reference_build(project: Project) -> ReferenceIndex:
    """The reference over every fact and episode of ``project`` as stored now."""
    return ReferenceIndex(_docs(project), count=count_tokens)
