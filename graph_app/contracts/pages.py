"""The pages of the graph's REST lists (facts, episodes, entities), limit/offset paginated."""

from __future__ import annotations

from graph_app.contracts.entities import EntityOut
from graph_app.contracts.episodes import EpisodeOut
from graph_app.contracts.facts import FactOut
from memoryproject.contracts import Output


class _Page(Output):
    """One page of a list (limit/offset): ``next`` and ``previous`` are the pages' URLs."""

    count: int
    next: str | None
    previous: str | None


class FactPage(_Page):
    results: list[FactOut]


class EpisodePage(_Page):
    results: list[EpisodeOut]


class EntityPage(_Page):
    results: list[EntityOut]
