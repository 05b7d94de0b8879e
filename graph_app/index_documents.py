"""The compiler's index documents built from database rows: a fact or an episode as a
``MemoryDoc`` (its tokens, entities, edge, stream and times) carrying the ``IndexItem`` that
renders and reports it (its cited line, section and order, token count, content hash and the
reasons screening flags it, if any).
"""

from __future__ import annotations

from datetime import UTC, datetime
from sys import intern
from typing import Any

from graph_app.domain.index_items import FACT_LINE_FIELDS, IndexItem
from graph_app.domain.memory_doc import INF, MemoryDoc
from graph_app.domain.profiles import salience
from graph_app.domain.render import (
    day,
    episode_citation,
    episode_line,
    episode_text,
    fact_citation,
    fact_line,
    fact_text,
    preview_counts,
)
from graph_app.domain.supersession import fact_status
from graph_app.domain.tiebreak import content_digest
from graph_app.domain.tokenize import identifiers, occurrence_terms, split_identifier, tokenize
from graph_app.text_cache import preview_warm
from memoryproject.domain.screening import record_screen
from memoryproject.domain.spotlight import flag_reasons
from memoryproject.tokens import count_tokens

FACTS_SECTION = "Facts"

_END_OF_TIME = datetime.max.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _ts(value: datetime | None, default: float = INF) -> float:
    return value.timestamp() if value is not None else default


def fact_row_status(row: dict[str, Any]) -> str:
    """The status a fact row's line states: how the fact ends, whenever that is ("superseded"
    once its successor's time comes: lines are indexed once, not per instant)."""
    return fact_status(
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        superseded=row["superseded_by_id"] is not None,
        at=_END_OF_TIME,
    )


def fact_row_text(row: dict[str, Any]) -> str:
    """The indexed text of a fact row (what its terms are read from)."""
    subject, name = row["subject__slug"], row["subject__name"] or ""
    return fact_text(
        subject=subject,
        subject_name=name if name != subject else "",
        predicate=row["predicate"],
        object_value=row["object_value"],
        source_title=row["source_episode__title"] or "",
    )


def episode_row_line(
    row: dict[str, Any], files: list[str], *, occurred_at: datetime | None
) -> tuple[str, int, int]:
    """The cited line of an episode row whose files are ``files`` (``episode_line``)."""
    return episode_line(
        episode_id=row["id"],
        category=row["category"],
        title=row["title"],
        content=row["content"],
        occurred_at=occurred_at,
        files=files,
        external_id=row["external_id"],
    )


def episode_row_text(row: dict[str, Any], files: list[str]) -> str:
    """The indexed text of an episode row whose files are ``files``."""
    return episode_text(
        category=row["category"],
        title=row["title"],
        content=row["content"],
        files=files,
        occurred_at=row["occurred_at"],
    )


def _terms_of(text: str) -> tuple[str, ...]:
    # Interned: a project's documents share a few thousand distinct terms, held once in memory
    # (and once in a snapshot) instead of once per occurrence.
    return tuple(map(intern, tokenize(text)))


def _interned(value: str | None) -> str | None:
    return None if value is None else intern(value)


def fact_doc(row: dict[str, Any]) -> MemoryDoc:
    subject = intern(row["subject__slug"])
    obj = _interned(row["object_entity__slug"])
    fields = dict(
        fact_id=row["id"],
        subject=subject,
        predicate=intern(row["predicate"]),
        object_value=row["object_value"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        status=intern(fact_row_status(row)),
        source_episode=row["source_episode_id"],
        sha256=row["sha256"],
    )
    line, keep, tail = fact_line(**fields)
    # The line as packing orders it: the server-made id, source id and hash as fixed words.
    nominal, _, _ = fact_line(
        **{
            **fields,
            "fact_id": "FACT",
            "sha256": "",
            "source_episode": "EPISODE" if fields["source_episode"] else None,
        }
    )
    name = row["subject__name"] or ""
    flags = flags_text(
        {
            "subject": subject,
            "subject_name": name,
            "predicate": row["predicate"],
            "object_value": row["object_value"],
        }
    )
    text = fact_row_text(row)
    item = IndexItem(
        kind="fact",
        id=row["id"],
        citation=fact_citation(row["id"]),
        line=line,
        keep=keep,
        section=FACTS_SECTION,
        order=(0.0, 0),
        fact_fields=tuple(fields[name] for name in FACT_LINE_FIELDS),
        line_tokens=count_tokens(line),
        sha256=row["sha256"],
        tail=tail,
        flags=flags,
        nominal_tokens=count_tokens(nominal),
    )
    return MemoryDoc(
        key=f"fact:{row['id']}",
        kind="fact",
        tokens=_terms_of(text),
        entities=(subject,) + ((obj,) if obj else ()),
        subject=subject,
        edge=(subject, obj) if obj else None,
        object_ref=None if obj else _interned(_entity_ref(row["object_value"])),
        salience=salience("fact"),
        recorded_at=_ts(row["recorded_at"]),
        valid_from=_ts(row["valid_from"], -INF),
        valid_until=_ts(row["valid_until"]),
        closed_at=_ts(row["closed_at"]),
        # Not the object's entity link: whether the value was linked depends on whether that
        # entity existed yet, i.e. on the order of the writes (``object_ref`` makes it an edge).
        digest=content_digest(
            {
                "kind": "fact",
                "subject": subject,
                "predicate": row["predicate"],
                "object_value": row["object_value"],
                "valid_from": _iso(row["valid_from"]),
                "valid_until": _iso(row["valid_until"]),
            }
        ),
        payload=item,
    )


def _entity_ref(value: str) -> str | None:
    """The object value of a fact as an entity id (lower-cased) when it reads as one: a single
    identifier such as ``payment_ledger`` or ``PaymentLedger``, not prose or a number."""
    value = value.strip()
    if not value or len(value) > 128 or " " in value or len(split_identifier(value)) < 2:
        return None
    return value.lower()


def _stream_of(metadata: Any) -> tuple[str | None, int | None]:
    if not isinstance(metadata, dict):
        return None, None
    stream, position = metadata.get("stream"), metadata.get("position")
    if not isinstance(stream, str) or not stream:
        return None, None
    if isinstance(position, bool) or not isinstance(position, int):
        return None, None
    return stream, position


def flags_text(fields: dict[str, Any]) -> str:
    """Why screening flags an item's recorded text, one reason a line ("" when clean): the
    item is then quarantined (memoryproject.domain.spotlight)."""
    return "\n".join(flag_reasons(record_screen(fields).flagged))


def episode_doc(row: dict[str, Any]) -> MemoryDoc:
    files = [str(f) for f in row["files_touched"] or []]
    occurred: datetime = row["occurred_at"]
    # Undated: the day is the heading of the episode's section.
    line, keep, tail = episode_row_line(row, files, occurred_at=None)
    flags = flags_text(
        {
            "title": row["title"],
            "content": row["content"],
            "files_touched": files,
            "external_id": row["external_id"] or "",
            "entities_mentioned": [str(e) for e in row["entities_mentioned"] or []],
        }
    )
    text = episode_row_text(row, files)
    stream, position = _stream_of(row["metadata"])
    stream = _interned(stream)
    item = IndexItem(
        kind="episode",
        id=row["id"],
        citation=episode_citation(row["id"], row["category"], row["external_id"]),
        line=line,
        keep=keep,
        section=intern(f"Episodes {day(occurred)}"),
        order=(occurred.timestamp(), position if position is not None else 0),
        external_id=row["external_id"],
        line_tokens=count_tokens(line),
        sha256=row["sha256"],
        tail=tail,
        flags=flags,
        preview_tokens=preview_counts(line, keep, tail, count_tokens),
    )
    preview_warm(line, keep, tail, item.section)
    return MemoryDoc(
        key=f"episode:{row['id']}",
        kind="episode",
        tokens=_terms_of(text)
        + tuple(map(intern, occurrence_terms(occurred.year, occurred.month, occurred.day))),
        entities=tuple(intern(str(e)) for e in row["entities_mentioned"] or []),
        mentions=tuple(map(intern, sorted(identifiers(f"{row['title']} {row['content']}")))),
        title_terms=_terms_of(row["title"]),
        salience=salience(row["category"]),
        stream=stream,
        position=position,
        recorded_at=_ts(row["recorded_at"]),
        valid_from=_ts(occurred, -INF),
        digest=content_digest(
            {
                "kind": "episode",
                "category": row["category"],
                "title": row["title"],
                "content": row["content"],
                "files": files,
                "entities": [str(e) for e in row["entities_mentioned"] or []],
                "external_id": row["external_id"],
                "occurred_at": _iso(occurred),
                "stream": stream,
                "position": position,
            }
        ),
        payload=item,
    )
