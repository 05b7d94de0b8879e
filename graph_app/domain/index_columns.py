"""A ``MemoryIndex`` as plain columns (numbers and one table of strings) and back, for the
compiler's index snapshot (``snapshot_file.py`` stores the columns).

Each document is one row of fixed columns; a tuple of strings (tokens, entities, mentions, title
terms) is a run of string numbers with its end offset; None is -1 (or a sentinel number). The
BM25 postings, the entity tables and the streams are stored as they stand, each entry by its
document's slot (the key and the (slot, salience) of an entry are its document's, as
``MemoryIndex.upsert`` links them); the rest (the key and slot maps, document lengths,
visibility columns) is derived from the documents as ``upsert`` derives it. A restored index holds exactly
the state of the one written (``tests/unit/test_snapshot_format.py`` compares every attribute),
and nothing read can be anything but a string, a number or a tuple of them. Lookups run over
whole columns (numpy, ``map``) rather than value by value: at 110,000 documents the restore
takes about as long as unpickling the same index did.

This module and ``memory_store.py``/``bm25.py`` are the ones that know the index's attributes: a
new attribute there is written and restored here. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import chain
from operator import attrgetter
from typing import Any, cast

import numpy as np

from graph_app.domain.bm25 import BM25Index
from graph_app.domain.memory_doc import MemoryDoc
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.memory_store import VISIBILITY_FILL
from graph_app.domain.tiebreak import tie_key

Arrays = dict[str, np.ndarray]
_NO_POSITION = np.iinfo(np.int64).min
_DOC_FIELDS = tuple(f.name for f in fields(MemoryDoc))


class StringTable:
    """Every distinct string once, numbered; columns hold the numbers (-1: None)."""

    def __init__(self) -> None:
        # Each string's number + 1 (None is 0), given on first sight by the dict itself: the
        # lookups of millions of tokens stay in C. A value that is not a string fails in
        # ``columns``.
        self._ids: defaultdict[str | None, int] = defaultdict()
        self._ids.default_factory = self._ids.__len__
        self._ids[None] = 0

    def ids(self, values: Iterable[str | None]) -> np.ndarray:
        column = np.fromiter(map(self._ids.__getitem__, values), dtype=np.int32)
        column -= 1
        return column

    def runs(self, runs: Iterable[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Tuples of strings as (their strings' numbers, one after the other; each one's end)."""
        listed = list(runs)
        ends = np.cumsum(list(map(len, listed)), dtype=np.int64)
        return self.ids(chain.from_iterable(listed)), ends

    def columns(self) -> Arrays:
        """The strings as one UTF-8 text, separated by NUL, and each one's end in it (in
        characters): split at once when no string holds a NUL, cut at the ends when one does."""
        found = list(self._ids)[1:]
        if not set(map(type, found)) <= {str}:
            raise TypeError("a column holds a value that is not a string")
        strings = cast(list[str], found)
        ends = np.cumsum(np.fromiter(map(len, strings), dtype=np.int64) + 1) - 1
        text = "\0".join(strings).encode("utf-8", "surrogatepass")
        return {"strings.text": np.frombuffer(text, dtype=np.uint8), "strings.ends": ends}


def spans(ends: list[int], gap: int = 0) -> Iterator[tuple[int, int]]:
    """(start, end) of each run from the runs' ends, ``gap`` apart."""
    return zip([0, *(end + gap for end in ends)], ends, strict=False)


def strings_read(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """The table ``StringTable.columns`` wrote, with None after its last string (the number
    -1 reads as None): an array of objects in memory, to look many numbers up at once."""
    text = arrays["strings.text"].tobytes().decode("utf-8", "surrogatepass")
    column = arrays["strings.ends"]
    table = np.empty(len(column) + 1, dtype=object)
    parts = text.split("\0")
    if len(parts) == len(column):
        table[:-1] = parts
        return table
    # A string holds a NUL (or the table is empty): cut the text at the ends.
    if len(column) and (column[-1] != len(text) or column[0] < 0 or (np.diff(column) <= 0).any()):
        raise ValueError("strings: ends do not match the text")
    table[:-1] = [text[a:b] for a, b in spans(column.tolist(), gap=1)]
    return table


def strings_at(strings: np.ndarray, ids: np.ndarray) -> list[str | None]:
    """The strings numbered ``ids`` in the table of ``strings_read`` (-1: None)."""
    if len(ids) and (int(ids.min()) < -1 or int(ids.max()) >= len(strings) - 1):
        raise ValueError("a string number past the table")
    found: list[str | None] = strings[ids].tolist()
    return found


def runs_read(strings: np.ndarray, ids: np.ndarray, ends: np.ndarray) -> list[tuple[str, ...]]:
    """The tuples of strings ``StringTable.runs`` wrote."""
    if len(ids) and int(ids.min()) < 0:
        raise ValueError("a run holds no string")
    flat = cast(list[str], strings_at(strings, ids))
    bounds = ends.tolist()
    if bounds and bounds[-1] != len(flat):
        raise ValueError("a run ends past its strings")
    return [tuple(flat[a:b]) for a, b in spans(bounds)]


@dataclass(frozen=True)
class PayloadColumns:
    """How the documents' payloads (the caller's own values) become columns and back."""

    write: Callable[[Sequence[object], StringTable], Arrays]
    read: Callable[[Mapping[str, np.ndarray], np.ndarray], list[object]]


def _table_write(strings: StringTable, name: str, table: Mapping[str, Iterable[int]]) -> Arrays:
    """A table of runs (an entity's items, a term's postings) as columns: each node's name,
    the end of its run, and the run's slots; the caller adds columns of values beside."""
    runs = [list(run) for run in table.values()]
    return {
        f"{name}.node": strings.ids(table),
        f"{name}.ends": np.cumsum([len(run) for run in runs], dtype=np.int64),
        f"{name}.slot": np.fromiter(chain.from_iterable(runs), dtype=np.int32),
    }


def _table_read(
    strings: np.ndarray, arrays: Mapping[str, np.ndarray], name: str, n: int
) -> tuple[list[str], Iterator[tuple[int, int]], list[int]]:
    """(node names, each one's (start, end) in the slots, the slots) of ``_table_write``."""
    nodes = strings_at(strings, arrays[f"{name}.node"])
    ends = arrays[f"{name}.ends"].tolist()
    column = arrays[f"{name}.slot"]
    if None in nodes or len(ends) != len(nodes) or (ends and ends[-1] != len(column)):
        raise ValueError(f"{name}: columns do not fit together")
    if len(column) and (int(column.min()) < 0 or int(column.max()) >= n):
        raise ValueError(f"{name}: a slot past the documents")
    bounds = spans(ends)
    return cast(list[str], nodes), bounds, column.tolist()


def _slots_of(table: Mapping[str, Mapping[str, tuple[Any, ...]]], at: int) -> dict[str, list[int]]:
    return {node: [value[at] for value in entries.values()] for node, entries in table.items()}


def index_columns(index: MemoryIndex, payloads: PayloadColumns) -> tuple[dict[str, Any], Arrays]:
    """(JSON values, arrays) that ``index_restore`` turns back into ``index``; the strings'
    table is among the arrays. Raises ValueError or TypeError on an index it cannot store."""
    bm25 = index.bm25
    docs = index._slot_docs
    if len(docs) != bm25.n_slots or any(doc is None for doc in docs):
        raise ValueError("an index with free slots is not stored")
    rows: list[MemoryDoc] = docs  # type: ignore[assignment]
    if any(d.edge is not None and len(d.edge) != 2 for d in rows):
        raise ValueError("an edge that is not a pair is not stored")
    strings = StringTable()
    arrays: Arrays = {
        "doc.key": strings.ids(map(attrgetter("key"), rows)),
        "doc.kind": strings.ids(map(attrgetter("kind"), rows)),
        "doc.subject": strings.ids(map(attrgetter("subject"), rows)),
        "doc.edge": strings.ids(e for d in rows for e in (d.edge or (None, None))),
        "doc.stream": strings.ids(map(attrgetter("stream"), rows)),
        "doc.object_ref": strings.ids(map(attrgetter("object_ref"), rows)),
        "doc.digest": strings.ids(map(attrgetter("digest"), rows)),
        "doc.position": np.fromiter(
            (_NO_POSITION if d.position is None else d.position for d in rows), dtype=np.int64
        ),
    }
    for name in ("recorded_at", "valid_from", "valid_until", "closed_at", "salience"):
        arrays[f"doc.{name}"] = np.fromiter(map(attrgetter(name), rows), dtype=np.float64)
    for name in ("tokens", "entities", "mentions", "title_terms"):
        ids, ends = strings.runs(map(attrgetter(name), rows))
        arrays[f"doc.{name}.ids"], arrays[f"doc.{name}.ends"] = ids, ends
    arrays.update(_table_write(strings, "postings", bm25._postings))
    arrays["postings.tf"] = np.fromiter(
        chain.from_iterable(map(dict.values, bm25._postings.values())), dtype=np.int64
    )
    for name, items in (("items_of", index._items_of), ("mentioned_by", index._mentioned_by)):
        arrays.update(_table_write(strings, name, _slots_of(items, 0)))
    for name, edges in (
        ("edges_of", index._edges_of),
        ("refs", index._refs),
        ("out_refs", index._out_refs),
    ):
        arrays.update(_table_write(strings, name, _slots_of(edges, 1)))
        arrays[f"{name}.other"] = strings.ids(v[0] for e in edges.values() for v in e.values())
    slot_of = bm25.slots
    streams = {name: [slot_of[key] for key in at.values()] for name, at in index._streams.items()}
    arrays.update(_table_write(strings, "streams", streams))
    arrays["streams.position"] = np.fromiter(
        (p for at in index._streams.values() for p in at), dtype=np.int64
    )
    arrays["titled.term"] = strings.ids(index._titled)
    arrays["titled.count"] = np.fromiter(index._titled.values(), dtype=np.int64)
    for name, column in payloads.write(list(map(attrgetter("payload"), rows)), strings).items():
        arrays[f"payload.{name}"] = column
    arrays.update(strings.columns())
    meta = {"docs": len(rows), "k1": bm25.k1, "b": bm25.b, "epsilon": bm25.epsilon}
    return meta, arrays


def index_restore(
    meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], payloads: PayloadColumns
) -> MemoryIndex:
    """The index ``index_columns`` wrote. Raises ValueError, KeyError, IndexError or TypeError
    on columns that do not fit together."""
    strings = strings_read(arrays)
    n = int(meta["docs"])
    found = strings_at(strings, arrays["doc.key"])
    if len(found) != n or len(set(found)) != n or None in found:
        raise ValueError("document keys: not one per document")
    keys = cast(list[str], found)
    columns = _doc_columns(strings, arrays, keys, payloads)
    docs = [MemoryDoc(*row) for row in zip(*columns.values(), strict=True)]
    index = MemoryIndex()
    index.bm25 = _bm25_restore(meta, arrays, strings, keys, columns["tokens"])
    index.docs = dict(zip(keys, docs, strict=True))
    index._slot_docs = list(docs)
    index._ties = [tie_key(doc) for doc in docs]
    # One (slot, salience) per document, shared by every entity it is about, as ``upsert``
    # shares it.
    items = list(zip(range(n), columns["salience"], strict=True))
    index._items_of = _entries_read(strings, arrays, "items_of", keys, items.__getitem__)
    index._mentioned_by = _entries_read(strings, arrays, "mentioned_by", keys, items.__getitem__)
    index._edges_of = _entries_read(strings, arrays, "edges_of", keys, None)
    index._refs = _entries_read(strings, arrays, "refs", keys, None)
    index._out_refs = _entries_read(strings, arrays, "out_refs", keys, None)
    nodes, bounds, slots = _table_read(strings, arrays, "streams", n)
    positions = arrays["streams.position"].tolist()
    keys_at = list(map(keys.__getitem__, slots))
    index._streams = {
        node: dict(zip(positions[a:b], keys_at[a:b], strict=True))
        for node, (a, b) in zip(nodes, bounds, strict=True)
    }
    terms = cast(list[str], strings_at(strings, arrays["titled.term"]))
    index._titled = Counter(dict(zip(terms, arrays["titled.count"].tolist(), strict=True)))
    index._arrays = _visibility_columns(arrays, columns["kind"])
    return index


def _entries_read(
    strings: np.ndarray,
    arrays: Mapping[str, np.ndarray],
    name: str,
    keys_of: list[str],
    value_of: Callable[[int], Any] | None,
) -> dict[str, dict[str, Any]]:
    """An entity table: node -> document key -> ``value_of(slot)``, or without it (an edge
    table) -> (the other node, slot)."""
    nodes, bounds, slots = _table_read(strings, arrays, name, len(keys_of))
    keys = list(map(keys_of.__getitem__, slots))
    if value_of is not None:
        values = list(map(value_of, slots))
    else:
        others = strings_at(strings, arrays[f"{name}.other"])
        if len(others) != len(slots) or None in others:
            raise ValueError(f"{name}: columns do not fit together")
        values = list(zip(others, slots, strict=True))
    return {
        node: dict(zip(keys[a:b], values[a:b], strict=True))
        for node, (a, b) in zip(nodes, bounds, strict=True)
    }


def _doc_columns(
    strings: np.ndarray,
    arrays: Mapping[str, np.ndarray],
    keys: list[str],
    payloads: PayloadColumns,
) -> dict[str, list[Any]]:
    """Each field of the documents, in the order of ``MemoryDoc``'s fields."""

    def runs(name: str) -> list[tuple[str, ...]]:
        return runs_read(strings, arrays[f"doc.{name}.ids"], arrays[f"doc.{name}.ends"])

    ends = strings_at(strings, arrays["doc.edge"])
    payload = {k[len("payload.") :]: v for k, v in arrays.items() if k.startswith("payload.")}
    columns: dict[str, list[Any]] = {
        "key": keys,
        "kind": strings_at(strings, arrays["doc.kind"]),
        "tokens": runs("tokens"),
        "entities": runs("entities"),
        "subject": strings_at(strings, arrays["doc.subject"]),
        "edge": [
            None if a is None or b is None else (a, b)
            for a, b in zip(ends[::2], ends[1::2], strict=True)
        ],
        "stream": strings_at(strings, arrays["doc.stream"]),
        "position": [None if p == _NO_POSITION else p for p in arrays["doc.position"].tolist()],
        **{
            name: arrays[f"doc.{name}"].tolist()
            for name in ("recorded_at", "valid_from", "valid_until", "closed_at")
        },
        "mentions": runs("mentions"),
        "title_terms": runs("title_terms"),
        "object_ref": strings_at(strings, arrays["doc.object_ref"]),
        "salience": arrays["doc.salience"].tolist(),
        "digest": strings_at(strings, arrays["doc.digest"]),
        "payload": payloads.read(payload, strings),
    }
    if tuple(columns) != _DOC_FIELDS:
        raise TypeError(f"MemoryDoc's fields are {_DOC_FIELDS}, not {tuple(columns)}")
    if any(len(column) != len(keys) for column in columns.values()):
        raise ValueError("document columns of different lengths")
    return columns


def _bm25_restore(
    meta: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    strings: np.ndarray,
    keys: list[str],
    tokens: list[tuple[str, ...]],
) -> BM25Index:
    bm25 = BM25Index(k1=float(meta["k1"]), b=float(meta["b"]), epsilon=float(meta["epsilon"]))
    n = len(keys)
    bm25._slot_of = dict(zip(keys, range(n), strict=True))
    bm25._keys = list(keys)
    bm25._doc_tokens = list(tokens)
    bm25._doc_len = list(map(len, tokens))
    bm25._total_len = sum(bm25._doc_len)
    terms, bounds, slots = _table_read(strings, arrays, "postings", n)
    tfs = arrays["postings.tf"].tolist()
    if len(tfs) != len(slots):
        raise ValueError("postings: columns do not fit together")
    bm25._postings = {
        term: dict(zip(slots[a:b], tfs[a:b], strict=True))
        for term, (a, b) in zip(terms, bounds, strict=True)
    }
    return bm25


def _visibility_columns(arrays: Mapping[str, np.ndarray], kinds: list[str]) -> Arrays:
    """``MemoryIndex._arrays`` for these documents, with room to grow as ``upsert`` grows it."""
    n = len(kinds)
    size = max(64, n)
    values = {
        "present": np.ones(n, dtype=bool),
        "fact": np.fromiter((kind == "fact" for kind in kinds), dtype=bool, count=n),
        "recorded": arrays["doc.recorded_at"],
        "start": arrays["doc.valid_from"],
        "until": arrays["doc.valid_until"],
        "closed": arrays["doc.closed_at"],
    }
    out: Arrays = {}
    for name, fill in VISIBILITY_FILL.items():
        column = np.full(size, fill, dtype=bool if isinstance(fill, bool) else np.float64)
        column[:n] = values[name]
        out[name] = column
    return out
