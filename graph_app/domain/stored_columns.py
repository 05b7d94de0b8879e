"""Columns read in place: the index snapshot's strings and tables, made into Python values only
when a request reaches them.

A restored index does not turn its 110,000 documents, their items and postings into objects up
front (that took about 2 s and 380 MiB at 100k facts): it keeps the snapshot's arrays, which view
the mapped file, and these classes make the values a ranking reads, when it reads them:

- ``StoredStrings``: the string table, each string decoded from its bytes when asked for (the
  short ones, the vocabulary of tokens and entity names, kept once decoded);
- ``SlotList``: a per-slot list (documents, tie-break keys, tokens) whose stored slots are made
  by a function, with the slots written since held apart;
- ``StoredTable``: a table of runs (an entity's items, a stream's positions) as a mapping of node
  to dict, each node's dict made when first reached and changed in place from then on.

They behave as the lists and dicts they stand for (``==`` compares their values), so the index's
code reads and updates both alike. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from codecs import utf_8_decode
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from functools import lru_cache
from itertools import accumulate
from typing import Any, Generic, Protocol, TypeVar, cast

import numpy as np

from graph_app.domain.working_set import STRINGS_KEPT, kept

T = TypeVar("T")
V = TypeVar("V")

# Strings up to this many bytes are kept once decoded (at most STRINGS_KEPT): tokens, short
# entity names, kinds, section titles (not ids, which are longer: there is one per document).
_KEPT_BYTES = 32
# Strings read through a reader less than this many bytes apart are read in one piece.
_GAP_BYTES = 1 << 12
# Up to this many strings asked for at once are placed in Python, more with numpy.
_FEW = 16


class Text(Protocol):
    """Where a string table's bytes are read from: the stored array's buffer, or a file's region
    read by position (``graph_app.snapshot.FileRegion``), which keeps the text out of a
    process's mapped pages."""

    def __len__(self) -> int: ...
    def __getitem__(self, at: slice, /) -> bytes | memoryview: ...


class StoredStrings:
    """The strings ``StringTable.columns`` wrote (UTF-8 bytes, each one's end), decoded on
    demand. Number -1 reads as None. ``text`` is read through ``reader`` when one is given (the
    same bytes, e.g. from the file by position), else in place."""

    def __init__(self, text: np.ndarray, ends: np.ndarray, *, reader: Text | None = None) -> None:
        n = len(ends)
        if reader is not None and len(reader) != len(text):
            raise ValueError("strings: the reader does not hold the text")
        if n and (int(ends[-1]) != len(text) or int(ends[0]) < 0 or (np.diff(ends) < 0).any()):
            raise ValueError("strings: ends do not match the text")
        self._text: Text = text.data if reader is None else reader
        # Left in the map (a list of Python numbers would weigh 70 bytes a string).
        self._ends = ends
        self._kept: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, number: int) -> str | None:
        if number < 0:
            return None
        found = self._kept.get(number)
        if found is None:
            end = int(self._ends[number])
            start = int(self._ends[number - 1]) if number else 0
            found = _decoded(self._text[start:end])
            if end - start <= _KEPT_BYTES:
                kept(self._kept, number, found, STRINGS_KEPT)
        return found

    def many(self, numbers: Iterable[int]) -> list[str | None]:
        """The strings numbered ``numbers`` (-1: None), their places looked up at once; the
        short ones kept once decoded are not read again."""
        listed = numbers if isinstance(numbers, list) else list(numbers)
        found: list[str | None] = list(map(self._kept.get, listed))
        missing = [place for place, value in enumerate(found) if value is None]
        if not missing:
            return found
        places = [place for place in missing if listed[place] >= 0]
        if not places:  # only -1s (None), the only numbers a table without strings may hold
            return found
        numbers = [listed[place] for place in places]
        if len(numbers) <= _FEW:
            bounds = self._ends
            ends = [int(bounds[n]) for n in numbers]
            starts = [int(bounds[n - 1]) if n else 0 for n in numbers]
        else:
            at = np.asarray(numbers, dtype=np.int64)
            ends = self._ends[at].tolist()
            starts = np.where(at > 0, self._ends[np.maximum(at, 1) - 1], 0).tolist()
        read = _read_near(self._text, starts, ends)
        for place, number, value, start, end in zip(
            places, numbers, read, starts, ends, strict=True
        ):
            found[place] = value
            if end - start <= _KEPT_BYTES:
                kept(self._kept, number, value, STRINGS_KEPT)
        return found

    def span(self, first: int, count: int) -> list[str]:
        """The ``count`` strings numbered from ``first`` on, decoded at once when they are ASCII
        (a table's first strings are its first column's: the documents' keys)."""
        if count <= 0:
            return []
        last = first + count - 1
        start = int(self._ends[first - 1]) if first else 0
        ends = self._ends[first : last + 1] - start
        data = bytes(self._text[start : int(self._ends[last])])
        if data.isascii():
            text = data.decode("ascii")
            bounds = ends.tolist()
            return [text[a:b] for a, b in zip([0, *bounds[:-1]], bounds, strict=True)]
        return cast(list[str], self.many(range(first, last + 1)))

    def check(self, column: np.ndarray, name: str, *, none: bool = True) -> np.ndarray:
        """``column`` when every number in it is a string of the table (or -1, when ``none``)."""
        if len(column) and (
            int(column.min()) < (-1 if none else 0) or int(column.max()) >= len(self)
        ):
            raise ValueError(f"{name}: a string number past the table")
        return column


def holds(table: Mapping[str, Mapping[Any, Any]], node: str) -> bool:
    """Whether ``table`` (a dict or a ``StoredTable``) has an entry for ``node``, without making
    a stored node's dict."""
    if isinstance(table, StoredTable):
        return table.holds(node)
    return bool(table.get(node))


def entries(table: Mapping[str, Mapping[Any, V]], node: str) -> Iterable[V]:
    """The values of ``table[node]`` (none when absent): a ``StoredTable``'s without making a
    stored node's dict."""
    if isinstance(table, StoredTable):
        return cast(Iterable[V], table.entries(node))
    found = table.get(node)
    return found.values() if found else ()


def _read_near(text: Text, starts: list[int], ends: list[int]) -> list[str]:
    """The strings at ``starts[i]:ends[i]`` of ``text`` (in place or through a reader), each
    run of strings lying near one another (a table's names, interned together) read in one
    piece: one read per run, not per string, and a run in ASCII decoded at once. The runs of a
    few strings are found in Python, of many with numpy (whose calls cost more than a few
    strings' loop)."""
    if not starts:
        return []
    if len(starts) <= _FEW:
        places = sorted(range(len(starts)), key=starts.__getitem__)
        first_at = [starts[k] for k in places]
        last_at = [ends[k] for k in places]
        reach_at = list(accumulate(last_at, max))
        cuts = [k for k in range(1, len(places)) if first_at[k] > reach_at[k - 1] + _GAP_BYTES]
    else:
        order = np.asarray(starts, dtype=np.int64).argsort(kind="stable")
        first, last = np.asarray(starts)[order], np.asarray(ends)[order]
        reach = np.maximum.accumulate(last)
        cuts = (np.flatnonzero(first[1:] > reach[:-1] + _GAP_BYTES) + 1).tolist()
        places, first_at, last_at = order.tolist(), first.tolist(), last.tolist()
        reach_at = reach.tolist()
    found = [""] * len(places)
    for lo, hi in zip([0, *cuts], [*cuts, len(places)], strict=True):
        low = first_at[lo]
        block = bytes(text[low : reach_at[hi - 1]])  # a reader's bytes as they are (a view copied)
        if block.isascii():
            whole = block.decode("ascii")
            for k in range(lo, hi):
                found[places[k]] = whole[first_at[k] - low : last_at[k] - low]
        else:
            try:  # each string decoded by the bytes' own method (no call of ours per string)
                for k in range(lo, hi):
                    found[places[k]] = block[first_at[k] - low : last_at[k] - low].decode(
                        "utf-8", "surrogatepass"
                    )
            except UnicodeDecodeError:  # bytes that are not a string: each read as it can be
                view = memoryview(block)
                for k in range(lo, hi):
                    found[places[k]] = _decoded(view[first_at[k] - low : last_at[k] - low])
    return found


def _decoded(data: bytes | memoryview) -> str:
    """The string ``StringTable`` encoded (lone surrogates included); bytes that are not one
    (cut mid-character by a forged file) read with replacement characters, never raise."""
    try:
        return utf_8_decode(data, "surrogatepass", True)[0]
    except UnicodeDecodeError:
        return utf_8_decode(data, "replace", True)[0]


class Runs:
    """Tuples of strings stored as runs (``StringTable.runs``): each one made on demand."""

    def __init__(self, strings: StoredStrings, ids: np.ndarray, ends: np.ndarray, n: int) -> None:
        strings.check(ids, "runs", none=False)
        if len(ends) != n or (
            n and (int(ends[-1]) != len(ids) or int(ends[0]) < 0 or (np.diff(ends) < 0).any())
        ):
            raise ValueError("runs: columns do not fit together")
        self._strings = strings
        self._ids = ids
        self._ends = ends

    def __getitem__(self, row: int) -> tuple[str, ...]:
        start = int(self._ends[row - 1]) if row else 0
        ids = self._ids[start : int(self._ends[row])].tolist()
        return cast(tuple[str, ...], tuple(map(self._strings.__getitem__, ids)))

    def lengths(self) -> np.ndarray:
        """Each tuple's length (int64)."""
        return np.diff(self._ends.astype(np.int64), prepend=0)


class Slots(Protocol[T]):
    """What the index needs of a per-slot list: a ``list`` or a ``SlotList``."""

    def __len__(self) -> int: ...
    def __getitem__(self, slot: int, /) -> T: ...
    def __setitem__(self, slot: int, value: T, /) -> None: ...
    def __iter__(self) -> Iterator[T]: ...
    def append(self, value: T, /) -> None: ...


class SlotList(Generic[T]):
    """A list by storage slot: the first ``stored`` slots made by ``make`` (the last ``cache``
    made are kept), the ones written or added since held as given."""

    def __init__(self, stored: int, make: Callable[[int], T], *, cache: int = 0) -> None:
        self._stored = stored
        self._make = lru_cache(maxsize=cache)(make) if cache else make
        self._written: dict[int, T] = {}
        self._added: list[T] = []

    def __len__(self) -> int:
        return self._stored + len(self._added)

    def __getitem__(self, slot: int) -> T:
        if slot < 0:
            slot += len(self)
        if slot >= self._stored:
            return self._added[slot - self._stored]
        found = self._written.get(slot, self._written)
        if found is self._written:
            if not 0 <= slot < self._stored:
                raise IndexError(slot)
            return self._make(slot)
        return cast(T, found)

    def __setitem__(self, slot: int, value: T) -> None:
        if slot >= self._stored:
            self._added[slot - self._stored] = value
        elif slot >= 0:
            self._written[slot] = value
        else:
            raise IndexError(slot)

    def append(self, value: T) -> None:
        self._added.append(value)

    def made(self, slot: int) -> bool:
        """Whether ``slot`` is made from the columns (stored, not written since)."""
        return 0 <= slot < self._stored and slot not in self._written

    def stored(self, slot: int) -> T:
        """The value the columns hold for a stored ``slot`` (which never changes), whether or
        not it was written since."""
        if not 0 <= slot < self._stored:
            raise IndexError(slot)
        return self._make(slot)

    def __iter__(self) -> Iterator[T]:
        return map(self.__getitem__, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SlotList | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class StoredTable(MutableMapping[str, dict[Any, V]]):
    """node -> {entry: value}, stored as one run of rows per node (``rows(start, end)`` makes a
    node's dict from its run); each node's dict is made once, when first reached, and is the one
    changed from then on. Nodes added since are plain dicts beside them."""

    def __init__(
        self,
        nodes: list[str],
        ends: list[int],
        rows: Callable[[int, int], dict[Any, V]],
        values: Callable[[int, int], list[V]] | None = None,
    ) -> None:
        self._run = {node: i for i, node in enumerate(nodes)}
        self._ends = ends
        self._rows = rows
        # A run's values alone, in its dict's order (what ranking reads), made without the dict.
        self._values = values
        self._made: dict[str, dict[Any, V]] = {}

    def _make(self, node: str) -> dict[Any, V] | None:
        made = self._made.get(node)
        if made is None:
            run = self._run.get(node)
            if run is None:
                return None
            made = self._made[node] = self._rows(*self._span(run))
        return made

    def _span(self, run: int) -> tuple[int, int]:
        """Where run number ``run`` starts and ends among the rows."""
        return self._ends[run - 1] if run else 0, self._ends[run]

    def __getitem__(self, node: str) -> dict[Any, V]:
        made = self._make(node)
        if made is None:
            raise KeyError(node)
        return made

    def holds(self, node: str) -> bool:
        """Whether ``node`` has an entry, answered from its run's length while its dict is not
        made (``is_entity`` asks it of every entity a fact's value names)."""
        made = self._made.get(node)
        if made is not None:
            return bool(made)
        run = self._run.get(node)
        if run is None:
            return False
        start, end = self._span(run)
        return end > start

    def entries(self, node: str) -> Iterable[V]:
        """The values of ``node``'s dict, in its order (none for a node not in the table): a
        stored run's read from the columns without making the dict, which only a change needs."""
        made = self._made.get(node)
        if made is not None:
            return made.values()
        run = self._run.get(node)
        if run is None:
            return ()
        if self._values is None:
            return cast(dict[Any, V], self._make(node)).values()
        return self._values(*self._span(run))

    def get(self, node: str, default: Any = None) -> Any:
        # Mapping.get's answer without its KeyError round trip: ranking asks for many nodes,
        # most of them in no run (a word that names no entity): answered by one lookup.
        made = self._made.get(node)
        if made is None:
            if node not in self._run:
                return default
            made = self._make(node)
        return made

    def __setitem__(self, node: str, value: dict[Any, V]) -> None:
        self._made[node] = value

    def __delitem__(self, node: str) -> None:
        if node not in self:
            raise KeyError(node)
        self._made.pop(node, None)
        self._run.pop(node, None)

    def __contains__(self, node: object) -> bool:
        return node in self._made or node in self._run

    def __iter__(self) -> Iterator[str]:
        yield from self._run
        yield from (node for node in self._made if node not in self._run)

    def __len__(self) -> int:
        return len(self._run) + sum(1 for node in self._made if node not in self._run)
