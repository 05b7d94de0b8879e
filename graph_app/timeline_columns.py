"""A project's facts as time travel decides over them: each fact as a line (its times as POSIX
seconds, the Merkle leaf hashes of its two forms) and the lines as numpy columns, over which the
facts visible at a valid and a transaction time, the latest-starting singular fact of each
subject and predicate winning, are a few vector operations.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from graph_app.domain.visibility import fact_visible, posix_seconds
from graph_app.record_canonical import fact_canonical_of
from memoryproject.domain.canonical import canonical_json
from memoryproject.domain.hashing import leaf_hash


class FactLine(NamedTuple):
    """What time travel needs of a fact to decide whether it is visible (times as POSIX
    seconds, INF when absent) and the Merkle leaf hashes of its two forms."""

    id: str
    subject_id: int
    predicate: str
    singular: bool
    valid_from: float
    valid_until: float
    recorded_at: float
    closed_at: float
    leaf_hash: bytes  # its form now
    open_leaf_hash: bytes | None  # its form before its closure was known (closed facts)


def fact_line(row: Mapping[str, Any], project_slug: str) -> FactLine:
    canonical = fact_canonical_of(row, project_slug)
    open_hash = None
    if row["closed_at"] is not None:
        # As fact_as_known_at reads it before its closure was known.
        seen = {**canonical, "valid_until": None, "closed_at": None, "superseded_by": None}
        open_hash = leaf_hash(canonical_json(seen))
    return FactLine(
        row["id"],
        row["subject_id"],
        sys.intern(row["predicate"]),
        bool(row["singular"]),
        posix_seconds(row["valid_from"], -math.inf),
        posix_seconds(row["valid_until"], math.inf),
        posix_seconds(row["recorded_at"], -math.inf),
        # A fact never closed reads as closed since ever: its form never changes.
        posix_seconds(row["closed_at"], -math.inf),
        leaf_hash(canonical_json(canonical)),
        open_hash,
    )


@dataclass(frozen=True)
class TimelineColumns:
    """A timeline's lines as numpy columns (row i is the i-th line by id)."""

    valid_from: np.ndarray
    valid_until: np.ndarray
    recorded_at: np.ndarray
    closed_at: np.ndarray
    singular: np.ndarray
    group: np.ndarray  # one number per (subject, predicate)
    reopens: np.ndarray  # has a form from before its closure was known
    ids: list[str]
    leaves: list[bytes]
    open_leaves: list[bytes | None]

    @classmethod
    def of(cls, lines: list[FactLine]) -> TimelineColumns:
        def column(index: int, dtype: type = np.float64) -> np.ndarray:
            return np.fromiter((line[index] for line in lines), dtype=dtype, count=len(lines))

        groups: dict[tuple[int, str], int] = {}
        return cls(
            valid_from=column(4),
            valid_until=column(5),
            recorded_at=column(6),
            closed_at=column(7),
            singular=column(3, np.bool_),
            group=np.fromiter(
                (groups.setdefault((line[1], line[2]), len(groups)) for line in lines),
                dtype=np.int64,
                count=len(lines),
            ),
            reopens=np.fromiter(
                (line[9] is not None for line in lines), dtype=np.bool_, count=len(lines)
            ),
            ids=[line[0] for line in lines],
            leaves=[line[8] for line in lines],
            open_leaves=[line[9] for line in lines],
        )

    @property
    def latest(self) -> float:
        if not len(self.recorded_at):
            return -math.inf
        return float(max(self.recorded_at.max(), self.closed_at.max()))

    def visible(self, at: float, known: float) -> np.ndarray:
        """The rows of the facts valid at ``at`` as known at ``known``, in order: the rules of
        ``facts_visible_at`` (the visibility rule, then the latest-starting singular fact of each
        subject and predicate wins: by valid_from, recorded_at, then id, i.e. row)."""
        visible = fact_visible(
            self.valid_from,
            self.valid_until,
            self.recorded_at,
            self.closed_at,
            as_of=at,
            known_at=known,
        )
        rows = np.flatnonzero(visible)
        singular = rows[self.singular[rows]]
        if len(singular):
            keys = (singular, self.recorded_at[singular], self.valid_from[singular])
            ranked = singular[np.lexsort((*keys, self.group[singular]))]
            groups = self.group[ranked]
            winners = ranked[np.append(groups[1:] != groups[:-1], True)]
            rows = np.union1d(rows[~self.singular[rows]], winners)
        return rows

    def snapshot(self, at: float, known: float) -> tuple[list[str], list[bytes]]:
        """The ids of the facts visible at ``at`` as known at ``known`` and the leaf hashes
        of their forms as then known (a closure not yet known shows the form before it)."""
        rows = self.visible(at, known)
        picked = rows.tolist()
        if len(picked) > 1:  # one C call per column (itemgetter answers a lone item bare)
            gather = operator.itemgetter(*picked)
            ids, hashes = list(gather(self.ids)), list(gather(self.leaves))
        else:
            ids, hashes = [self.ids[r] for r in picked], [self.leaves[r] for r in picked]
        reopened = np.flatnonzero(self.reopens[rows] & (self.closed_at[rows] > known))
        for position in reopened.tolist():
            hashes[position] = self.open_leaves[picked[position]] or hashes[position]
        return ids, hashes
