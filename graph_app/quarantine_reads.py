"""Record reads hold flagged memory back: a fact or episode whose recorded text screening flags
is answered with that text withheld and the reasons under ``quarantined`` (REST and MCP alike:
the same selectors serve both), until a reviewer releases it (``audit_app.quarantine``).

Screening an item is cached by its content hash (facts and episodes never change), so reading
the same items again costs a dictionary lookup; a page holding a flagged item costs one query
for the releases.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, TypeVar

from graph_app.contracts.entities import EgoEdge
from graph_app.contracts.episodes import EpisodeOut
from graph_app.contracts.facts import FactOut
from memoryproject.domain.screening import record_screen
from memoryproject.domain.spotlight import WITHHELD, flag_reasons
from memoryproject.models import Project
from memoryproject.quarantine import items_released

E = TypeVar("E", bound=EpisodeOut)

_CACHE_MAX = 200_000
_cache: dict[str, tuple[str, ...]] = {}
_lock = threading.Lock()


def _reasons(key: str, fields: dict[str, Any]) -> tuple[str, ...]:
    with _lock:
        found = _cache.get(key)
    if found is not None:
        return found
    reasons = flag_reasons(record_screen(fields).flagged)
    with _lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = reasons
    return reasons


def fact_reasons(fact: FactOut) -> tuple[str, ...]:
    """Why screening flags the fact's recorded text (() when clean)."""
    fields = {
        "subject": fact.subject,
        "predicate": fact.predicate,
        "object_value": fact.object_value,
        "object_entity": fact.object_entity or "",
    }
    return _reasons(f"fact:{fact.sha256}", fields)


def episode_reasons(episode: EpisodeOut) -> tuple[str, ...]:
    """Why screening flags the episode's recorded text (() when clean)."""
    fields = {
        "title": episode.title,
        "content": episode.content,
        "files_touched": list(episode.files_touched),
        "entities_mentioned": list(episode.entities_mentioned),
        "external_id": episode.external_id or "",
        "metadata": dict(episode.metadata),
    }
    return _reasons(f"episode:{episode.sha256}", fields)


def _released(project: Project, flagged: list[tuple[str, str, str]]) -> set[tuple[str, str]]:
    return items_released(project=project, items=flagged)


def facts_held(project: Project, facts: Sequence[FactOut]) -> list[FactOut]:
    """``facts`` with the recorded text of each flagged, unreleased one withheld."""
    reasons = {fact.id: fact_reasons(fact) for fact in facts}
    released = _released(project, [("fact", f.id, f.sha256) for f in facts if reasons[f.id]])
    return [
        fact
        if not reasons[fact.id] or ("fact", fact.id) in released
        else fact.model_copy(
            update={
                "subject": WITHHELD,
                "predicate": WITHHELD,
                "object_value": WITHHELD,
                "object_entity": None,
                "quarantined": list(reasons[fact.id]),
            }
        )
        for fact in facts
    ]


def episodes_held(project: Project, episodes: Sequence[E]) -> list[E]:
    """``episodes`` with the recorded text of each flagged, unreleased one withheld."""
    reasons = {episode.id: episode_reasons(episode) for episode in episodes}
    released = _released(project, [("episode", e.id, e.sha256) for e in episodes if reasons[e.id]])
    return [
        episode
        if not reasons[episode.id] or ("episode", episode.id) in released
        else episode.model_copy(
            update={
                "title": WITHHELD,
                "content": WITHHELD,
                "files_touched": [],
                "entities_mentioned": [],
                "metadata": {},
                "external_id": None,
                "quarantined": list(reasons[episode.id]),
            }
        )
        for episode in episodes
    ]


def edges_held(edges: Sequence[EgoEdge]) -> list[EgoEdge]:
    """The ego graph's edges without those whose recorded text screening flags."""
    return [
        edge
        for edge in edges
        if not _reasons(
            f"edge:{edge.fact_id}",
            {"subject": edge.source, "predicate": edge.predicate, "object_entity": edge.target},
        )
    ]
