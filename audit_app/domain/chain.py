"""Canonical hashing of injection records and the rules that name a break in their chain.

A record's hash is the SHA-256 of the RFC 8785 JSON of its hashed fields, ``prev_hash``
included, so each record commits to the whole chain before it. The delivered text is
represented by its SHA-256 (the text itself lives apart and may be erased), so the chain never
depends on how a database stores long text, and erasing a text leaves every hash intact.

Records carry a ``format``: format 1 (records written before receipts named what was asked and
delivered) hashes the first field list; format 2 adds ``format``, ``request`` and ``items``. An
unknown format hashes every field given, which can never match a stored hash. Any format hashes
``client_reported`` (the name a client gave itself, beside the authenticated ``client``) when it
is not empty, so records written before that field existed verify as they did.

``chain_walk`` reads the records in seq order and names the first one that breaks the chain,
against the anchor it starts from (genesis, or the last record a purge removed), the head and
any checkpoints (``Pin``). Pure Python: the selector turns rows into ``Link`` values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import groupby
from typing import Any

from memoryproject.domain.canonical import CanonicalizationError, canonical_json

EMPTY_TEXT_SHA256 = hashlib.sha256(b"").hexdigest()
RECORD_FORMAT = 2
#: The legal floor of log retention in days (EU AI Act Art. 19 and 26(6): six months).
MINIMUM_RETENTION_DAYS = 183

#: What format 1 hashes, in the order the exported log (audit_app.export) shows its columns.
HASHED_FIELDS_V1 = (
    "seq",
    "project_id",
    "source",
    "channel",
    "client",
    "status",
    "decision",
    "trust_score",
    "threshold",
    "mode",
    "trace_ids",
    "prompt_sha256",
    "generated_at",
    "created_at",
    "prev_hash",
)
# Canonical JSON sorts keys, so the order of these names does not matter.
HASHED_FIELDS = (*HASHED_FIELDS_V1, "format", "request", "items")
FIELDS_BY_FORMAT = {1: HASHED_FIELDS_V1, 2: HASHED_FIELDS}
#: Fields added after records were written: hashed only when non-empty, so the records written
#: before them keep their hashes, and a value set or cleared later still breaks the chain.
OPTIONAL_HASHED_FIELDS = ("client_reported",)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_hash(payload: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the hashed fields of the record's format (timestamps
    as ISO strings)."""
    names = FIELDS_BY_FORMAT.get(payload.get("format", 1), tuple(payload))
    hashed = {name: payload[name] for name in names}
    hashed.update({name: payload[name] for name in OPTIONAL_HASHED_FIELDS if payload.get(name)})
    return hashlib.sha256(canonical_json(hashed)).hexdigest()


# --- checkpoints ------------------------------------------------------------------------------


# --- the walk ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """One stored record as the walk reads it: ``payload`` is its canonical form (to recompute
    the hash) and ``text_problem`` what is wrong with its stored text ("" when nothing)."""

    id: int
    seq: int
    prev_hash: str
    record_hash: str
    payload: Mapping[str, Any]
    text_problem: str = ""

    @cached_property
    def self_consistent(self) -> bool:
        try:
            return record_hash(self.payload) == self.record_hash
        except (CanonicalizationError, KeyError, TypeError, ValueError):
            return False  # a stored value no JSON canonical form takes: altered


@dataclass(frozen=True)
class Pin:
    """A hash known for a seq from outside the records: the head, or a signed checkpoint."""

    seq: int
    hash: str
    label: str
    kind: str = "checkpoint"  # or "head"


@dataclass(frozen=True)
class Break:
    id: int | None
    seq: int
    kind: str
    reason: str


@dataclass
class Walk:
    """Where a walk stands: the last record accepted and the count verified so far."""

    seq: int
    hash: str
    checked: int = 0
    prev: Link | None = None
    pins: dict[int, list[Pin]] = field(default_factory=dict)


def _missing(first: int, last: int) -> str:
    return f"record {first} is missing" if first == last else f"records {first}-{last} are missing"


def _duplicates(group: list[Link], successor: list[Link] | None, head: Pin | None) -> Break:
    """Several records claim one seq: a copy (same hash) or a forged second record. The genuine
    one is the record the next one links to (or the head names)."""
    first = group[0]
    if all(link.record_hash == first.record_hash for link in group):
        copy = group[-1]
        return Break(
            copy.id,
            copy.seq,
            "duplicate",
            f"a copy of record id {first.id}: the same record appears twice at seq {copy.seq}",
        )
    linked = {successor[0].prev_hash} if successor else set()
    if head is not None and head.seq == first.seq:
        linked.add(head.hash)
    genuine = next((link for link in group if link.record_hash in linked), group[0])
    forged = next(link for link in group if link is not genuine)
    return Break(
        forged.id,
        forged.seq,
        "inserted",
        f"a second record at seq {forged.seq} that the chain does not link to (record id "
        f"{genuine.id} is the one it does): inserted behind the application's back",
    )


def _inserted_before(link: Link, walk: Walk) -> Break | None:
    """``link`` fails its own hash but would match one seq lower, and shares its predecessor
    with the record before it: that record was inserted and the rest renumbered."""
    prev = walk.prev
    if prev is None or link.prev_hash != prev.prev_hash:
        return None
    try:
        if record_hash({**link.payload, "seq": link.seq - 1}) != link.record_hash:
            return None
    except (CanonicalizationError, KeyError, TypeError, ValueError):
        return None
    walk.checked -= 1
    return Break(
        prev.id,
        prev.seq,
        "inserted",
        f"inserted behind the application's back: the records after it were renumbered "
        f"(record id {link.id}, now at seq {link.seq}, was written as seq {link.seq - 1})",
    )


def _confirmed(link: Link, successor: list[Link] | None, head: Pin | None) -> bool:
    """The chain after ``link`` still commits to it as it is now."""
    if successor:
        nxt = successor[0]
        return nxt.seq == link.seq + 1 and nxt.prev_hash == link.record_hash
    return head is not None and head.seq == link.seq and head.hash == link.record_hash


def _link_break(
    link: Link, walk: Walk, successor: list[Link] | None, head: Pin | None, start_label: str
) -> Break:
    prev = walk.prev
    if prev is None:
        return Break(
            link.id,
            link.seq,
            "link",
            f"prev_hash does not match the previous record's hash ({start_label})",
        )
    if link.self_consistent and _confirmed(link, successor, head):
        # This record, and the one after it, still commit to the previous record's original
        # hash: it is the previous record that was rewritten (with its hash recomputed).
        walk.checked -= 1
        return Break(
            prev.id,
            prev.seq,
            "rewritten",
            f"record_hash does not match the hash the chain holds for it: rewritten and "
            f"rehashed (seq {link.seq} still links to its original hash)",
        )
    return Break(link.id, link.seq, "link", "prev_hash does not match the previous record's hash")


def _pin_break(link: Link, walk: Walk) -> Break | None:
    for pin in walk.pins.pop(link.seq, []):
        if pin.hash == link.record_hash:
            continue
        if pin.kind == "head":
            reason = (
                "record_hash differs from the head's: this record, or one before it, was "
                "rewritten and rehashed (or the head was changed)"
            )
        else:
            reason = (
                f"record_hash differs from the one {pin.label} holds for seq {pin.seq}: this "
                "record, or one before it, was rewritten and the chain recomputed"
            )
        return Break(link.id, link.seq, pin.kind, reason)
    return None


def _gap_break(
    link: Link, walk: Walk, misplaced: Callable[[str, int], Link | None], start_label: str
) -> Break | None:
    expected = walk.seq + 1
    if link.seq < expected:
        return Break(
            link.id,
            link.seq,
            "anchor",
            f"seq {link.seq} is at or before the chain's start ({start_label}): it should "
            "not be there",
        )
    if link.seq == expected:
        return None
    moved = misplaced(walk.hash, link.id)
    if moved is not None:
        return Break(
            moved.id,
            moved.seq,
            "renumbered",
            f"its seq was changed: it links after seq {walk.seq} but is stored at seq {moved.seq}",
        )
    return Break(
        link.id,
        link.seq,
        "gap",
        f"seq {link.seq} follows {walk.seq}: {_missing(expected, link.seq - 1)}",
    )


def _examine(
    group: list[Link],
    successor: list[Link] | None,
    walk: Walk,
    head: Pin | None,
    misplaced: Callable[[str, int], Link | None],
    start_label: str,
) -> Break | None:
    link = group[0]
    if len(group) > 1:
        return _duplicates(group, successor, head)
    if head is not None and link.seq > head.seq:
        return Break(
            link.id,
            link.seq,
            "beyond_head",
            f"seq {link.seq} is beyond the head (seq {head.seq}): appended behind the "
            "application's back, or the head was set back",
        )
    if not link.self_consistent:
        return _inserted_before(link, walk) or Break(
            link.id, link.seq, "altered", "record_hash does not match the record's fields"
        )
    gap = _gap_break(link, walk, misplaced, start_label)
    if gap is not None:
        return gap
    if link.prev_hash != walk.hash:
        return _link_break(link, walk, successor, head, start_label)
    pinned = _pin_break(link, walk)
    if pinned is not None:
        return pinned
    if link.text_problem:
        return Break(link.id, link.seq, "text", link.text_problem)
    return None


def _groups(links: Iterable[Link]) -> Iterator[tuple[list[Link], list[Link] | None]]:
    """Records grouped by seq (several only when a unique constraint was removed), each with
    the group after it."""
    grouped = (list(group) for _, group in groupby(links, key=lambda link: link.seq))
    current = next(grouped, None)
    while current is not None:
        following = next(grouped, None)
        yield current, following
        current = following


def _end_break(walk: Walk, head: Pin | None) -> Break | None:
    """After the last record: the head and checkpoints must not reach beyond it."""
    end = walk.seq
    beyond = [pin for pins in walk.pins.values() for pin in pins if pin.seq > end]
    if head is not None and head.seq > end:
        beyond.insert(0, head)
    if not beyond:
        return None
    pin = max(beyond, key=lambda p: p.seq)
    cause = "truncated" if pin.kind == "head" else "truncated, or wiped and restarted"
    return Break(
        None,
        end + 1,
        "truncated",
        f"{pin.label} reaches seq {pin.seq} but the log ends at seq {end}: "
        f"{_missing(end + 1, pin.seq)} ({cause})",
    )


def chain_walk(
    links: Iterable[Link],
    *,
    start: tuple[int, str],
    start_label: str,
    head: Pin | None,
    pins: Sequence[Pin] = (),
    misplaced: Callable[[str, int], Link | None] = lambda prev_hash, not_id: None,
) -> tuple[int, Break | None]:
    """Walks ``links`` (in seq order, then id) from ``start`` (seq, hash); answers how many
    records verified and the first break, named at the record that is wrong.

    ``head`` is the chain head (None when there is no head row); ``pins`` the checkpoints'
    (seq, hash) to hold the chain to; ``misplaced(prev_hash, not_id)`` finds a record that
    links to ``prev_hash`` wherever its seq now puts it (a renumbered record)."""
    walk = Walk(seq=start[0], hash=start[1])
    all_pins = [*([replace(head, kind="head")] if head is not None else []), *pins]
    for pin in all_pins:
        if pin.seq > walk.seq:
            walk.pins.setdefault(pin.seq, []).append(pin)
    for group, successor in _groups(links):
        broken = _examine(group, successor, walk, head, misplaced, start_label)
        if broken is not None:
            return walk.checked, broken
        link = group[0]
        walk.seq, walk.hash, walk.prev = link.seq, link.record_hash, link
        walk.checked += 1
    if head is None and walk.checked:
        return walk.checked, Break(
            None, walk.seq, "head", "the chain head is missing while the log holds records"
        )
    return walk.checked, _end_break(walk, head)
