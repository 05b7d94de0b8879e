"""The knowledge graph's tables: entities, bi-temporal facts, immutable episodes and the
per-project revision counter that lets a cached index catch up with changes."""

from graph_app.models.entities import Entity
from graph_app.models.episodes import Episode, EpisodeCategory, EpisodeFile
from graph_app.models.facts import TemporalFact
from graph_app.models.revision import GraphRevision

__all__ = [
    "Entity",
    "Episode",
    "EpisodeCategory",
    "EpisodeFile",
    "GraphRevision",
    "TemporalFact",
]
