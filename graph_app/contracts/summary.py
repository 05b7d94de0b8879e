"""The graph's summary: its revision, what it holds (facts by status, episodes by category)
and whether it verifies."""

from __future__ import annotations

from pydantic import Field

from memoryproject.contracts import Output


class FactCounts(Output):
    total: int
    active: int = Field(description="Valid now.")
    scheduled: int = Field(description="Valid from a future time.")
    superseded: int
    retracted: int


class EpisodeCounts(Output):
    total: int
    by_category: dict[str, int]


class GraphSummary(Output):
    project: str
    revision: int
    entities: int
    facts: FactCounts
    episodes: EpisodeCounts
    merkle_root: str
    verified: bool
    mismatched_ids: list[str]
