"""What the context compiler keeps of each indexed document to render and report it
(``IndexItem``, the payload of its ``MemoryDoc``), and those items as plain columns for the
index snapshot (``index_columns.py``). Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any, Literal, cast

import numpy as np

from graph_app.domain.index_columns import Arrays, PayloadColumns, StringTable, strings_at


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
    # transaction time
    fact_fields: tuple[Any, ...] = ()
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


_ITEM_FIELDS = tuple(f.name for f in fields(IndexItem))

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


def _times(column: np.ndarray) -> list[datetime | None]:
    return [None if m == _NO_TIME else _EPOCH + timedelta(0, 0, m) for m in column.tolist()]


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
    arrays: Arrays = {
        name: strings.ids(map(attrgetter(name), items))
        for name in ("kind", "id", "citation", "line", "section", "external_id", "sha256", "flags")
    }
    for name in ("keep", "line_tokens", "tail", "nominal_tokens"):
        arrays[name] = np.fromiter(map(attrgetter(name), items), dtype=np.int64)
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


def _items_read(arrays: Mapping[str, np.ndarray], strings: np.ndarray) -> list[object]:
    def text(name: str) -> list[str | None]:
        return strings_at(strings, arrays[name])

    fact_columns = [
        _times(arrays[f"fact.{name}"]) if name in _TIMES else text(f"fact.{name}")
        for name in FACT_LINE_FIELDS
    ]
    is_fact = arrays["fact"].tolist()
    if sum(is_fact) != len(fact_columns[0]):
        raise ValueError("items: fact fields not one set per fact")
    facts = iter(zip(*fact_columns, strict=True))
    fact_fields = [next(facts) if fact else () for fact in is_fact]
    columns: dict[str, Iterable[Any]] = {
        "kind": text("kind"),
        "id": text("id"),
        "citation": text("citation"),
        "line": text("line"),
        "keep": arrays["keep"].tolist(),
        "section": text("section"),
        "order": zip(arrays["order.time"].tolist(), arrays["order.position"].tolist(), strict=True),
        "fact_fields": fact_fields,
        "external_id": text("external_id"),
        "line_tokens": arrays["line_tokens"].tolist(),
        "sha256": text("sha256"),
        "tail": arrays["tail"].tolist(),
        "flags": text("flags"),
        "nominal_tokens": arrays["nominal_tokens"].tolist(),
    }
    if tuple(columns) != _ITEM_FIELDS:
        raise TypeError(f"IndexItem's fields are {_ITEM_FIELDS}, not {tuple(columns)}")
    return [IndexItem(*row) for row in zip(*columns.values(), strict=True)]


#: How the index snapshot stores and restores these items.
ITEM_COLUMNS = PayloadColumns(write=_items_write, read=_items_read)
