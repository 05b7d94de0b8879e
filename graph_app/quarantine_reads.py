"""Record reads hold flagged memory back: a fact or episode whose recorded text screening flags
is answered with that text withheld and the reasons under ``quarantined`` (REST and MCP alike:
the same selectors serve both), until a reviewer releases it (``audit_app.quarantine``).

Screening an item is cached by its content hash (facts and episodes never change), so reading
the same items again costs a dictionary lookup; a page holding a flagged item costs one query
for the releases.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

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


#: What a read shows of a quarantined item in place of its recorded text, by kind.
_WITHHELD_FIELDS: dict[str, dict[str, Any]] = {
    "fact": {
        "subject": WITHHELD,
        "predicate": WITHHELD,
        "object_value": WITHHELD,
        "object_entity": None,
    },
    "episode": {
        "title": WITHHELD,
        "content": WITHHELD,
        "files_touched": [],
        "entities_mentioned": [],
        "metadata": {},
        "external_id": None,
    },
}
R = TypeVar("R", bound=FactOut | EpisodeOut)


def _held(
    project: Project, kind: str, records: Sequence[R], reasons_of: Callable[[R], tuple[str, ...]]
) -> list[R]:
    """``records`` with the recorded text of each flagged, unreleased one withheld (one query
    for the releases, only when one is flagged)."""
    reasons = {record.id: reasons_of(record) for record in records}
    flagged = [(kind, r.id, r.sha256) for r in records if reasons[r.id]]
    released = items_released(project=project, items=flagged) if flagged else set()
    return [
        record
        if not reasons[record.id] or (kind, record.id) in released
        else cast(
            R,
            record.model_copy(
                update={**_WITHHELD_FIELDS[kind], "quarantined": list(reasons[record.id])}
            ),
        )
        for record in records
    ]


def facts_held(project: Project, facts: Sequence[FactOut]) -> list[FactOut]:
    """``facts`` with the recorded text of each flagged, unreleased one withheld."""
    return _held(project, "fact", facts, fact_reasons)


def episodes_held(project: Project, episodes: Sequence[E]) -> list[E]:
    """``episodes`` with the recorded text of each flagged, unreleased one withheld."""
    return _held(project, "episode", episodes, episode_reasons)


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
