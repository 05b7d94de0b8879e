"""One searchable memory item as the compiler's index holds it: a fact or an episode as plain
values (its tokens, the entities it is about, its stream position and its times). Pure Python:
no Django import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

INF = math.inf


@dataclass(frozen=True)
class MemoryDoc:
    """One searchable memory item. Times are POSIX seconds (``INF`` = open / unknown)."""

    key: str
    kind: str  # "fact" | "episode"
    tokens: tuple[str, ...]
    entities: tuple[str, ...] = ()
    subject: str | None = None
    edge: tuple[str, str] | None = None
    stream: str | None = None
    position: int | None = None
    recorded_at: float = 0.0
    valid_from: float = -INF  # facts: valid_from; episodes: occurred_at
    valid_until: float = INF
    closed_at: float = INF
    # Identifiers the item names in its text (lower-cased): it is about those that are entities
    # of the graph even when its writer did not list them in ``entities``.
    mentions: tuple[str, ...] = ()
    # The terms of the item's title (an episode's: in a conversation, its speaker).
    title_terms: tuple[str, ...] = ()
    # A fact whose object value reads as an entity id without being linked to one (written
    # before that entity existed, the way agents write facts): an edge once the entity is known.
    object_ref: str | None = None
    # How much an agent needs the item when it is about an entity near the query's: invariants,
    # decisions and bug root causes before notes (1.0 = the most).
    salience: float = 1.0
    # SHA-256 of the fields the user recorded (``tiebreak.content_digest``): with the valid time,
    # what orders items the ranking cannot tell apart (``tiebreak.tie_key``), never an id.
    digest: str = ""
    payload: object = field(default=None, compare=False)
