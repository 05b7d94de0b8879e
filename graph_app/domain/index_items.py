"""What the context compiler keeps of each indexed document to render and report it
(``IndexItem``, the payload of its ``MemoryDoc``), and those items as plain columns for the
index snapshot (``index_columns.py``). Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any, Literal, cast

import numpy as np

from graph_app.domain.index_columns import Arrays, PayloadColumns, StringTable
from graph_app.domain.stored_columns import StoredStrings
from graph_app.domain.working_set import WORKING_SET


@dataclass(frozen=True)
class IndexItem:
    """What the compiler needs to render and report one document."""

    kind: Literal["fact", "episode"]
    id: str
    citation: str
    line: str
    keep: int
    section: str
    order: tuple[float, int]
    # facts only: the values of ``FACT_LINE_FIELDS``, to re-render as known at an earlier
    # transaction time (a restored index's are read from its columns when first asked for)
    fact_fields: Sequence[Any] = ()
    # episodes only: the user's own id, which the citation uses when it is citable
    external_id: str | None = None
    # tokens of ``line``, counted once when the document is indexed
    line_tokens: int = -1
    # the source's content hash (a fact's as known, in a replay), which receipts record
    sha256: str = ""
    # characters at the end of ``line`` never truncated (the spotlight's closing mark, ...)
    tail: int = 0
    # why screening flagged the item's recorded text ("; "-joined reasons; "" when clean):
    # a flagged item is quarantined, never delivered until released
    flags: str = ""
    # facts only: tokens of ``line`` with its id, source id and hash as fixed words, which
    # packing orders by (-1: ``line_tokens``)
    nominal_tokens: int = -1
    # episodes only: the tokens of what a preview of ``line`` counts (``render.preview_counts``),
    # counted once when the document is indexed; () when none were
    preview_tokens: tuple[int, ...] = ()


#: The arguments of ``fact_line``, in the order ``IndexItem.fact_fields`` keeps their values.
FACT_LINE_FIELDS = (
    "fact_id",
    "subject",
    "predicate",
    "object_value",
    "valid_from",
    "valid_until",
    "status",
    "source_episode",
    "sha256",
)
_TIMES = frozenset({"valid_from", "valid_until"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_TIME = np.iinfo(np.int64).min
_MICROSECOND = timedelta(microseconds=1)


def _micros(value: object) -> int:
    """A UTC time (the database's) as whole microseconds since the epoch (exact, unlike a
    float; read back as a UTC time)."""
    if value is None:
        return _NO_TIME
    if not isinstance(value, datetime) or value.utcoffset() != timedelta(0):
        raise TypeError(f"not a UTC time: {value!r}")
    return (value - _EPOCH) // _MICROSECOND


def _time(micros: int) -> datetime | None:
    return None if micros == _NO_TIME else _EPOCH + timedelta(0, 0, micros)


#: An item's strings, in the order its columns are read.
_TEXTS = ("kind", "id", "citation", "line", "section", "external_id", "sha256", "flags")
#: Those that are each item's own (the rest are a few values, again and again: kind, section,
#: flags), numbered and read item by item.
_OWN = ("id", "citation", "line", "external_id", "sha256")


def _items_write(payloads: Sequence[object], strings: StringTable) -> Arrays:
    if not set(map(type, payloads)) <= {IndexItem}:
        raise TypeError("a payload that is not an IndexItem is not stored")
    items = cast(Sequence[IndexItem], payloads)
    orders = list(map(attrgetter("order"), items))
    if not (
        set(map(len, orders)) <= {2}
        and set(map(type, map(itemgetter(0), orders))) <= {float}
        and set(map(type, map(itemgetter(1), orders))) <= {int}
    ):
        raise TypeError("an item whose order is not (float, int) is not stored")
    # An item's own strings numbered one after the other (row by row, not column by column):
    # a restored index reads them from the file together, in one read (``_StoredItems.items``).
    own = strings.ids(getattr(item, name) for item in items for name in _OWN)
    arrays: Arrays = {
        name: strings.ids(map(attrgetter(name), items))
        if name not in _OWN
        else np.ascontiguousarray(own[_OWN.index(name) :: len(_OWN)])
        for name in _TEXTS
    }
    for name in ("keep", "line_tokens", "tail", "nominal_tokens"):
        arrays[name] = np.fromiter(map(attrgetter(name), items), dtype=np.int64)
    previews = list(map(attrgetter("preview_tokens"), items))
    arrays["preview_tokens"] = np.fromiter(
        (count for counts in previews for count in counts), dtype=np.int32
    )
    arrays["preview_tokens.ends"] = np.cumsum(np.fromiter(map(len, previews), dtype=np.int64))
    arrays["order.time"] = np.fromiter(map(itemgetter(0), orders), dtype=np.float64)
    arrays["order.position"] = np.fromiter(map(itemgetter(1), orders), dtype=np.int64)
    fields = list(map(attrgetter("fact_fields"), items))
    if not set(map(len, fields)) <= {0, len(FACT_LINE_FIELDS)}:
        raise TypeError("an item whose fact fields are not those of a fact line is not stored")
    arrays["fact"] = np.fromiter(map(bool, fields), dtype=bool)
    by_field = list(zip(*filter(None, fields), strict=True)) or [()] * len(FACT_LINE_FIELDS)
    for name, values in zip(FACT_LINE_FIELDS, by_field, strict=True):
        if name in _TIMES:
            arrays[f"fact.{name}"] = np.fromiter(map(_micros, values), dtype=np.int64)
        else:
            arrays[f"fact.{name}"] = strings.ids(values)
    return arrays


class _StoredFactFields(Sequence[Any]):
    """A restored fact item's ``fact_fields``, read from the columns when first asked for: a
    live compile never reads them (a replay and the semantic backend do)."""

    __slots__ = ("_items", "_row", "_values")

    def __init__(self, items: _StoredItems, row: int) -> None:
        self._items = items
        self._row = row
        self._values: tuple[Any, ...] | None = None

    def _made(self) -> tuple[Any, ...]:
        if self._values is None:
            self._values = self._items.fact_fields(self._row)
        return self._values

    def __getitem__(self, index: Any) -> Any:
        return self._made()[index]

    def __len__(self) -> int:
        return len(FACT_LINE_FIELDS)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._made() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._made())

    def __repr__(self) -> str:
        return repr(self._made())


#: Items a restored index keeps once made (about 2 KiB each, 8 MiB in all at most): the ones
#: requests reach again (graph_app.domain.working_set).
ITEMS_KEPT = WORKING_SET


class _StoredItems:
    """The items' columns, checked, and each slot's ``IndexItem`` made from them on demand."""

    _NUMBERS = ("keep", "line_tokens", "tail", "nominal_tokens", "order.time", "order.position")

    def __init__(self, arrays: Mapping[str, np.ndarray], strings: StoredStrings, n: int) -> None:
        self._strings = strings
        self._columns = {name: strings.check(arrays[name], name) for name in _TEXTS}
        self._columns.update((name, arrays[name]) for name in self._NUMBERS)
        is_fact = arrays["fact"]
        if any(len(column) != n for column in self._columns.values()) or len(is_fact) != n:
            raise ValueError("items: columns of different lengths")
        # Each fact's row among the facts' own columns.
        self._fact_row = np.cumsum(is_fact, dtype=np.int64) - 1
        self._is_fact = is_fact
        facts = int(is_fact.sum())
        self._facts = {
            name: arrays[f"fact.{name}"]
            if name in _TIMES
            else strings.check(arrays[f"fact.{name}"], name)
            for name in FACT_LINE_FIELDS
        }
        if any(len(column) != facts for column in self._facts.values()):
            raise ValueError("items: fact fields not one set per fact")
        previews, ends = arrays["preview_tokens"], arrays["preview_tokens.ends"]
        if (
            len(ends) != n
            or (n and (int(ends[-1]) != len(previews) or int(ends[0]) < 0))
            or (np.diff(ends) < 0).any()
            or (previews < 0).any()
        ):
            raise ValueError("items: preview token counts do not fit the items")
        self._previews = previews
        self._preview_ends = ends
        self._kept: dict[int, IndexItem] = {}

    def fact_fields(self, row: int) -> tuple[Any, ...]:
        """The fact fields of the fact at ``row`` of the facts' columns."""
        return tuple(
            _time(int(column[row])) if name in _TIMES else self._strings[int(column[row])]
            for name, column in self._facts.items()
        )

    def _fact_fields(self, at: np.ndarray) -> list[Sequence[Any]]:
        """The fact fields of the items at slots ``at`` (() for an episode's), each read when
        first asked for."""
        rows = self._fact_row[at].tolist()
        return [
            _StoredFactFields(self, row) if fact else ()
            for fact, row in zip(self._is_fact[at].tolist(), rows, strict=True)
        ]

    def items(self, slots: Sequence[int]) -> list[object]:
        """The items at ``slots``: the ones kept since they were last made, the others made from
        their columns at once (and kept, up to ``ITEMS_KEPT``: the stored columns never change)."""
        kept = self._kept
        found: list[object | None] = list(map(kept.get, slots))
        missing = [place for place, item in enumerate(found) if item is None]
        if missing:
            wanted = [slots[place] for place in missing]
            if len(kept) + len(wanted) > ITEMS_KEPT:
                kept.clear()
            for place, slot, item in zip(missing, wanted, self._made(wanted), strict=True):
                found[place] = item
                if len(kept) < ITEMS_KEPT:
                    kept[slot] = item
        return cast(list[object], found)

    def _made(self, slots: Sequence[int]) -> list[IndexItem]:
        """The items at ``slots`` made from their columns, read at once."""
        at = np.asarray(slots, dtype=np.int64)
        strings = self._strings
        # Each item's own strings asked for together, item by item: stored one after the other,
        # they are read in one piece per item.
        own = strings.many(np.stack([self._columns[n][at] for n in _OWN], axis=1).ravel().tolist())
        text = {
            # A few values, again and again: looked up in the strings kept once decoded.
            name: list(map(strings.__getitem__, self._columns[name][at].tolist()))
            if name not in _OWN
            else own[_OWN.index(name) :: len(_OWN)]
            for name in _TEXTS
        }
        number = {name: self._columns[name][at].tolist() for name in self._NUMBERS}
        previews, ends = self._previews, self._preview_ends
        # Each item's counts run from the end of the one before it (0 for the first item).
        starts = np.where(at > 0, ends[np.maximum(at - 1, 0)], 0)
        rows = zip(
            *text.values(),
            *number.values(),
            self._fact_fields(at),
            [
                tuple(previews[start:end].tolist())
                for start, end in zip(starts.tolist(), ends[at].tolist(), strict=True)
            ],
            strict=True,
        )
        return [
            IndexItem(
                kind=kind,
                id=id_,
                citation=citation,
                line=line,
                keep=keep,
                section=section,
                order=(time, position),
                fact_fields=fact_fields,
                external_id=external_id,
                line_tokens=line_tokens,
                sha256=sha256,
                tail=tail,
                flags=flags,
                nominal_tokens=nominal_tokens,
                preview_tokens=preview_tokens,
            )
            for (
                kind,
                id_,
                citation,
                line,
                section,
                external_id,
                sha256,
                flags,
                keep,
                line_tokens,
                tail,
                nominal_tokens,
                time,
                position,
                fact_fields,
                preview_tokens,
            ) in rows
        ]


def _items_read(
    arrays: Mapping[str, np.ndarray], strings: StoredStrings, n: int
) -> Callable[[Sequence[int]], list[object]]:
    return _StoredItems(arrays, strings, n).items


#: How the index snapshot stores and restores these items.
ITEM_COLUMNS = PayloadColumns(write=_items_write, read=_items_read)
