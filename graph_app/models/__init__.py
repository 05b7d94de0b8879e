"""The knowledge graph's tables: entities, bi-temporal facts, immutable episodes, the
per-project revision counter that lets a cached index catch up with changes, and the
hash-chained change log that seals every write."""

from graph_app.models.changes import ChangeAction, GraphChange, RecordType
from graph_app.models.entities import Entity
from graph_app.models.episodes import Episode, EpisodeCategory, EpisodeFile
from graph_app.models.facts import TemporalFact
from graph_app.models.revision import GraphRevision

__all__ = [
    "ChangeAction",
    "Entity",
    "Episode",
    "EpisodeCategory",
    "EpisodeFile",
    "GraphChange",
    "GraphRevision",
    "RecordType",
    "TemporalFact",
]
