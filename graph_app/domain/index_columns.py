"""A ``MemoryIndex`` as plain columns (numbers and one table of strings) and back, for the
compiler's index snapshot (``snapshot_file.py`` stores the columns).

Each document is one row of fixed columns; a tuple of strings (tokens, entities, mentions, title
terms) is a run of string numbers with its end offset; None is -1 (or a sentinel number). The
BM25 postings (each term's slots ascending), the entity tables and the streams are stored as
they stand, each entry by its document's slot (the key and the (slot, salience) of an entry are
its document's, as ``MemoryIndex.upsert`` links them); the rest (the key and slot maps, document
lengths, visibility columns) is derived from the documents as ``upsert`` derives it.

A restored index reads the columns in place (``stored_columns.py``): the restore checks every
column and makes only the key map, the document lengths, the visibility columns and the names of
the tables' nodes; a document, its item, a term's postings or an entity's items are made when a
request reaches them. It holds exactly the state of the one written
(``tests/unit/test_snapshot_format.py`` compares every attribute), and nothing read can be
anything but a string, a number or a tuple of them.

This module and ``memory_store.py``/``bm25.py`` are the ones that know the index's attributes: a
new attribute there is written and restored here. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, count
from operator import attrgetter
from typing import Any, cast

import numpy as np

from graph_app.domain.bm25 import BM25Index
from graph_app.domain.memory_doc import MemoryDoc
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.memory_store import VISIBILITY_FILL, slot_column
from graph_app.domain.postings import Postings
from graph_app.domain.stored_columns import Runs, SlotList, StoredStrings, StoredTable, Text
from graph_app.domain.tiebreak import TieKey, tie_of
from graph_app.domain.working_set import WORKING_SET

Arrays = dict[str, np.ndarray]
_NO_POSITION = np.iinfo(np.int64).min


class StringTable:
    """Every distinct string once, numbered; columns hold the numbers (-1: None)."""

    def __init__(self) -> None:
        # Each string's number + 1 (None is 0), given on first sight by the dict itself: the
        # lookups of millions of tokens stay in C. The numbers come from a counter, not from
        # the dict's own length: a dict whose factory is its own method is a reference cycle,
        # which would keep every string of the index alive after a snapshot is written, until
        # a full collection (never, once the process freezes its objects). A value that is not
        # a string fails in ``columns``.
        self._ids: defaultdict[str | None, int] = defaultdict(count(1).__next__)
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
        """The strings as one UTF-8 text and each one's end in it (in bytes): a reader decodes
        the one it needs (``StoredStrings``)."""
        found = list(self._ids)[1:]
        if not set(map(type, found)) <= {str}:
            raise TypeError("a column holds a value that is not a string")
        encoded = [text.encode("utf-8", "surrogatepass") for text in cast(list[str], found)]
        ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        text = b"".join(encoded)
        return {"strings.text": np.frombuffer(text, dtype=np.uint8), "strings.ends": ends}


@dataclass(frozen=True)
class PayloadColumns:
    """How the documents' payloads (the caller's own values) become columns, and the columns
    a payload per slot (checked when read, each payload made when asked for)."""

    write: Callable[[Sequence[object], StringTable], Arrays]
    read: Callable[
        [Mapping[str, np.ndarray], StoredStrings, int], Callable[[Sequence[int]], list[object]]
    ]


def _table_write(strings: StringTable, name: str, table: Mapping[str, Iterable[int]]) -> Arrays:
    """A table of runs (an entity's items, a term's postings) as columns: each node's name,
    the end of its run, and the run's slots; the caller adds columns of values beside."""
    runs = [list(run) for run in table.values()]
    return {
        f"{name}.node": strings.ids(table),
        f"{name}.ends": np.cumsum([len(run) for run in runs], dtype=np.int64),
        f"{name}.slot": np.fromiter(chain.from_iterable(runs), dtype=np.int32),
    }


@dataclass(frozen=True)
class _StoredRuns:
    """A table ``_table_write`` wrote, checked: its nodes, their runs' ends, and the slots."""

    nodes: list[str]
    ends: list[int]
    slots: np.ndarray


def _table_read(
    strings: StoredStrings, arrays: Mapping[str, np.ndarray], name: str, n: int
) -> _StoredRuns:
    nodes = strings.many(strings.check(arrays[f"{name}.node"], name, none=False).tolist())
    ends = arrays[f"{name}.ends"]
    column = arrays[f"{name}.slot"]
    if len(ends) != len(nodes) or (
        len(ends) and (int(ends[-1]) != len(column) or (np.diff(ends) < 0).any() or ends[0] < 0)
    ):
        raise ValueError(f"{name}: columns do not fit together")
    if len(column) and (int(column.min()) < 0 or int(column.max()) >= n):
        raise ValueError(f"{name}: a slot past the documents")
    return _StoredRuns(cast(list[str], nodes), ends.tolist(), column)


def _beside(arrays: Mapping[str, np.ndarray], name: str, runs: _StoredRuns) -> np.ndarray:
    """The column ``name`` of values beside a table's slots, one per slot."""
    column = arrays[name]
    if len(column) != len(runs.slots):
        raise ValueError(f"{name}: columns do not fit together")
    return column


def _slots_of(table: Mapping[str, Mapping[str, tuple[Any, ...]]], at: int) -> dict[str, list[int]]:
    return {node: [value[at] for value in entries.values()] for node, entries in table.items()}


def index_columns(index: MemoryIndex, payloads: PayloadColumns) -> tuple[dict[str, Any], Arrays]:
    """(JSON values, arrays) that ``index_restore`` turns back into ``index``; the strings'
    table is among the arrays. Raises ValueError or TypeError on an index it cannot store."""
    bm25 = index.bm25
    # Listed once: a restored index makes each document from its columns as it is read.
    listed = list(index._slot_docs)
    if len(listed) != bm25.n_slots or any(doc is None for doc in listed):
        raise ValueError("an index with free slots is not stored")
    rows = cast(list[MemoryDoc], listed)
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
        "doc.position": np.fromiter(
            (_NO_POSITION if d.position is None else d.position for d in rows), dtype=np.int64
        ),
    }
    for name in ("recorded_at", "valid_from", "valid_until", "closed_at", "salience"):
        arrays[f"doc.{name}"] = np.fromiter(map(attrgetter(name), rows), dtype=np.float64)
    arrays.update(_digests_write(strings, [d.digest for d in rows]))
    arrays["doc.tie"] = index._arrays["tie"][: len(rows)].copy()
    for name in ("tokens", "entities", "mentions", "title_terms"):
        ids, ends = strings.runs(map(attrgetter(name), rows))
        arrays[f"doc.{name}.ids"], arrays[f"doc.{name}.ends"] = ids, ends
    runs = sorted(bm25._postings.runs(), key=lambda run: run[0])
    arrays.update(_table_write(strings, "postings", {term: slots for term, (slots, _) in runs}))
    arrays["postings.tf"] = np.concatenate(
        [np.zeros(0, dtype=np.int32), *(tfs.astype(np.int32) for _, (_, tfs) in runs)]
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
    meta: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    payloads: PayloadColumns,
    *,
    text: Text | None = None,
) -> MemoryIndex:
    """The index ``index_columns`` wrote, reading ``arrays`` in place: every column is checked
    now (numbers within their tables, runs within their columns), the values are made when a
    request reaches them (``stored_columns.py``); the strings' bytes through ``text`` when
    given. Raises ValueError, KeyError, IndexError or TypeError on columns that do not fit
    together."""
    strings = StoredStrings(arrays["strings.text"], arrays["strings.ends"], reader=text)
    n = int(meta["docs"])
    numbers = strings.check(arrays["doc.key"], "document keys", none=False)
    # Each key once: the table holds each string once, so distinct numbers are distinct keys.
    # ``index_columns`` numbers the keys first: 0, 1, ... in slot order.
    in_order = len(numbers) == n and np.array_equal(numbers, np.arange(n))
    if len(numbers) != n or (not in_order and (np.diff(np.sort(numbers)) == 0).any()):
        raise ValueError("document keys: not one per document")
    # Each read from the columns when reached (a ranking reaches a few hundred): 110,000 keys
    # held as strings, with a dict of them, weighed 14 MiB in every process at 100k.
    docs = _StoredDocs(
        strings, arrays, _StoredKeys(strings, n, None if in_order else numbers), payloads
    )
    index = MemoryIndex()
    index.bm25 = _bm25_restore(meta, arrays, strings, docs)
    # Documents, tie-break keys (about 200 bytes each: sorts among tied items ask for them
    # again and again) and stream places kept once made, the ones requests reach most; the
    # rest made again from the columns when reached.
    index._slot_docs = SlotList(n, docs.doc, cache=WORKING_SET)
    index._stored_payloads = docs.payloads
    index._ties = SlotList(n, docs.tie, cache=WORKING_SET)
    index._places = SlotList(n, docs.place, cache=WORKING_SET)
    salience = arrays["doc.salience"]

    def items(runs: _StoredRuns) -> StoredTable[Any]:
        # One (slot, salience) per document, as ``upsert`` links it.
        def values(start: int, end: int) -> list[Any]:
            slots = runs.slots[start:end]
            return list(zip(slots.tolist(), salience[slots].tolist(), strict=True))

        def made(start: int, end: int) -> dict[str, Any]:
            return {docs.keys[value[0]]: value for value in values(start, end)}

        return StoredTable(runs.nodes, runs.ends, made, values)

    def edges(name: str, runs: _StoredRuns) -> StoredTable[Any]:
        others = strings.check(_beside(arrays, f"{name}.other", runs), name, none=False)

        def values(start: int, end: int) -> list[Any]:
            names = strings.many(others[start:end].tolist())
            return list(zip(names, runs.slots[start:end].tolist(), strict=True))

        def made(start: int, end: int) -> dict[str, Any]:
            return {docs.keys[value[1]]: value for value in values(start, end)}

        return StoredTable(runs.nodes, runs.ends, made, values)

    for name in ("items_of", "mentioned_by"):
        setattr(index, f"_{name}", items(_table_read(strings, arrays, name, n)))
    for name in ("edges_of", "refs", "out_refs"):
        setattr(index, f"_{name}", edges(name, _table_read(strings, arrays, name, n)))
    streams = _table_read(strings, arrays, "streams", n)
    positions = _beside(arrays, "streams.position", streams)

    def positioned(start: int, end: int) -> dict[int, str]:
        slots = streams.slots[start:end].tolist()
        at = positions[start:end].tolist()
        return {p: docs.keys[s] for p, s in zip(at, slots, strict=True)}

    index._streams = StoredTable(streams.nodes, streams.ends, positioned)
    titled = strings.check(arrays["titled.term"], "titled", none=False).tolist()
    counts = arrays["titled.count"].tolist()
    if len(counts) != len(titled):
        raise ValueError("titled: columns do not fit together")
    index._titled = Counter(dict(zip(cast(list[str], strings.many(titled)), counts, strict=True)))
    index._arrays = _visibility_columns(arrays, docs.facts)
    return index


class _StoredKeys:
    """Each stored slot's document key, read from the strings when asked for: by the slot's own
    number, or through ``numbers`` (the keys' numbers by slot) when the table numbers them
    otherwise."""

    def __init__(self, strings: StoredStrings, n: int, numbers: np.ndarray | None) -> None:
        self._strings = strings
        self._n = n
        self._numbers = numbers

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, slot: int) -> str:
        if not 0 <= slot < self._n:
            raise IndexError(slot)
        number = slot if self._numbers is None else int(self._numbers[slot])
        return cast(str, self._strings[number])


class _StoredDocs:
    """The documents' columns, checked, and each slot's ``MemoryDoc`` and tie-break key made
    from them on demand."""

    def __init__(
        self,
        strings: StoredStrings,
        arrays: Mapping[str, np.ndarray],
        keys: _StoredKeys,
        payloads: PayloadColumns,
    ) -> None:
        n = len(keys)
        self.keys = keys
        self._strings = strings
        self._columns: dict[str, np.ndarray] = {}
        for name in ("kind", "subject", "stream", "object_ref"):
            self._columns[name] = strings.check(arrays[f"doc.{name}"], name)
        self.digest = _digests_read(strings, arrays, n)
        self._columns["edge"] = strings.check(arrays["doc.edge"], "edge")
        numbers = ("position", "recorded_at", "valid_from", "valid_until", "closed_at", "salience")
        for name in numbers:
            self._columns[name] = arrays[f"doc.{name}"]
        if (
            any(len(c) != n for k, c in self._columns.items() if k != "edge")
            or len(self._columns["edge"]) != 2 * n
        ):
            raise ValueError("document columns of different lengths")
        self._runs = {
            name: Runs(strings, arrays[f"doc.{name}.ids"], arrays[f"doc.{name}.ends"], n)
            for name in ("tokens", "entities", "mentions", "title_terms")
        }
        self.tokens = self._runs["tokens"]
        kinds = self._columns["kind"]
        # A set of the few kinds, not np.unique (whose first call imports numpy.ma: 14 ms).
        fact = [i for i in set(kinds.tolist()) if strings[i] == "fact"]
        self.facts = np.isin(kinds, fact)
        payload = {k[len("payload.") :]: v for k, v in arrays.items() if k.startswith("payload.")}
        self.payloads = payloads.read(payload, strings, n)

    def doc(self, slot: int) -> MemoryDoc:
        text, c, runs = self._strings.__getitem__, self._columns, self._runs
        a, b = (text(int(i)) for i in c["edge"][2 * slot : 2 * slot + 2])
        position = int(c["position"][slot])
        return MemoryDoc(
            key=self.keys[slot],
            kind=cast(str, text(int(c["kind"][slot]))),
            tokens=runs["tokens"][slot],
            entities=runs["entities"][slot],
            subject=text(int(c["subject"][slot])),
            edge=None if a is None or b is None else (a, b),
            stream=text(int(c["stream"][slot])),
            position=None if position == _NO_POSITION else position,
            recorded_at=float(c["recorded_at"][slot]),
            valid_from=float(c["valid_from"][slot]),
            valid_until=float(c["valid_until"][slot]),
            closed_at=float(c["closed_at"][slot]),
            mentions=runs["mentions"][slot],
            title_terms=runs["title_terms"][slot],
            object_ref=text(int(c["object_ref"][slot])),
            salience=float(c["salience"][slot]),
            digest=self.digest(slot),
            payload=self.payloads([slot])[0],
        )

    def place(self, slot: int) -> tuple[str, int] | None:
        """The document's (stream, position) from its columns (``doc_place``)."""
        stream = self._strings[int(self._columns["stream"][slot])]
        position = int(self._columns["position"][slot])
        return None if stream is None or position == _NO_POSITION else (stream, position)

    def tie(self, slot: int) -> TieKey:
        """``tie_key`` of the document at ``slot``, from its columns."""
        return tie_of(float(self._columns["valid_from"][slot]), self.digest(slot), self.keys[slot])


_DIGEST_BYTES = 32


def _digests_write(strings: StringTable, digests: list[str]) -> Arrays:
    """The documents' content digests: as 32 bytes each when every one is a SHA-256 in
    lowercase hex (``content_digest``), read in place without a string read; otherwise as
    strings."""
    try:
        raw = b"".join(bytes.fromhex(d) for d in digests)
    except (TypeError, ValueError):
        raw = b""
    if len(raw) != _DIGEST_BYTES * len(digests) or raw.hex() != "".join(digests):
        return {"doc.digest": strings.ids(digests)}
    return {"doc.digest.sha256": np.frombuffer(raw, dtype=np.uint8)}


def _digests_read(
    strings: StoredStrings, arrays: Mapping[str, np.ndarray], n: int
) -> Callable[[int], str]:
    """The digest of the document at a slot, from whichever column ``_digests_write`` wrote."""
    raw = arrays.get("doc.digest.sha256")
    if raw is None:
        numbers = strings.check(arrays["doc.digest"], "digest")
        if len(numbers) != n:
            raise ValueError("document columns of different lengths")
        return lambda slot: cast(str, strings[int(numbers[slot])])
    if len(raw) != _DIGEST_BYTES * n:
        raise ValueError("document columns of different lengths")
    return lambda slot: raw[_DIGEST_BYTES * slot : _DIGEST_BYTES * (slot + 1)].tobytes().hex()


def _bm25_restore(
    meta: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    strings: StoredStrings,
    docs: _StoredDocs,
) -> BM25Index:
    bm25 = BM25Index(k1=float(meta["k1"]), b=float(meta["b"]), epsilon=float(meta["epsilon"]))
    keys = docs.keys
    n = len(keys)
    bm25._slot_of_made = None  # made when a write or a lookup by key first needs it
    bm25._keys = SlotList(n, keys.__getitem__)
    bm25._doc_tokens = SlotList(n, docs.tokens.__getitem__)
    lengths = docs.tokens.lengths()
    bm25._lengths = lengths.astype(np.float64)
    bm25._total_len = int(lengths.sum())
    runs = _table_read(strings, arrays, "postings", n)
    tfs = _beside(arrays, "postings.tf", runs)
    # Each run's slots ascending (``Postings.run`` is searched by bisection).
    steps = np.diff(runs.slots)
    ends = np.asarray(runs.ends, dtype=np.int64)
    if len(steps):  # a step from one run into the next is no step within a run
        between = ends[:-1]
        steps[between[(between > 0) & (between < len(runs.slots))] - 1] = 1
    if (steps <= 0).any() or (len(tfs) and int(tfs.min()) <= 0):
        raise ValueError("postings: a run out of order")
    bm25._postings = Postings(runs.nodes, ends, runs.slots, tfs, stored_slots=n)
    return bm25


def _visibility_columns(arrays: Mapping[str, np.ndarray], facts: np.ndarray) -> Arrays:
    """``MemoryIndex._arrays`` for these documents, with room to grow as ``upsert`` grows it."""
    n = len(facts)
    size = max(64, n)
    values = {
        "present": np.ones(n, dtype=bool),
        "fact": facts,
        "recorded": arrays["doc.recorded_at"],
        "start": arrays["doc.valid_from"],
        "until": arrays["doc.valid_until"],
        "closed": arrays["doc.closed_at"],
        "tie": arrays["doc.tie"],
    }
    out: Arrays = {}
    for name, fill in VISIBILITY_FILL.items():
        column = slot_column(fill, size)
        column[:n] = values[name]
        out[name] = column
    return out
