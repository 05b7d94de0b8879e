"""The documents of a memory index and what is derived from them, kept in step one document at a
time: the BM25 postings (``bm25.py``), the entity graph (the items about each entity, edges
between entities, object values naming one, mentions), the streams, the title terms, and the
per-slot visibility columns from which a request's ``Visibility`` is decided. Ranking is
``memory_index.py``'s. Pure Python + numpy: no Django import.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from operator import attrgetter
from typing import TypeVar

import numpy as np

from graph_app.domain.bm25 import BM25Index
from graph_app.domain.dense_column import DenseColumn
from graph_app.domain.memory_doc import INF, MemoryDoc
from graph_app.domain.ranked_payloads import RankedPayloads, TakenPayloads
from graph_app.domain.stored_columns import SlotList, Slots, entries, holds
from graph_app.domain.termvectors import CorpusRows
from graph_app.domain.tiebreak import EMPTY_TIE, TieKey, digest_prefix, tie_key
from graph_app.domain.visibility import episode_visible, fact_visible, valid_at
from graph_app.domain.working_set import WORKING_SET, grown, kept

T = TypeVar("T")

#: An entity table: node -> item key -> value (a dict, or a restored index's ``StoredTable``).
Table = MutableMapping[str, dict[str, T]]

# Each per-slot column's value for a slot that holds no document: the visibility columns, and
# the digest prefix (``tiebreak.digest_prefix``) by which sorts break ties as ``tie_key`` does.
VISIBILITY_FILL: dict[str, bool | float | int] = {
    "present": False,
    "fact": False,
    "recorded": INF,
    "start": -INF,
    "until": INF,
    "closed": INF,
    "tie": 0,
}


def slot_column(fill: bool | float | int, size: int) -> np.ndarray:
    """A per-slot column of ``size`` slots holding ``fill``, of ``fill``'s type."""
    dtype = bool if isinstance(fill, bool) else np.int64 if isinstance(fill, int) else np.float64
    return np.full(size, fill, dtype=dtype)


@dataclass(frozen=True)
class Visibility:
    """Which documents a request may see.

    ``as_of``/``known_at`` None and not ``include_superseded``: the live view (facts still
    open, every episode). With ``known_at``: only what had been recorded by then, closures
    learned later ignored. With ``as_of``: facts valid at that instant, episodes that had
    occurred by then.
    """

    as_of: float | None = None
    known_at: float | None = None
    include_superseded: bool = False
    # When given (time travel), exactly these facts are visible: the caller's bi-temporal
    # selector decided, including which of overlapping singular facts wins.
    fact_keys: frozenset[str] | None = None
    # The live view's instant: the facts valid then (a scheduled fact is not yet, a fact whose
    # successor is due later still is). None: the facts still open.
    now: float | None = None


class _Docs(Mapping[str, MemoryDoc]):
    """The documents by key: a view of the store's slots (a key's slot is its BM25 slot)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __getitem__(self, key: str) -> MemoryDoc:
        slot = self._store.bm25.slot(key)
        doc = None if slot is None else self._store._slot_docs[slot]
        if doc is None:
            raise KeyError(key)
        return doc

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._store.bm25

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.bm25.slots)

    def __len__(self) -> int:
        return len(self._store.bm25)


# The stream neighbourhoods ``_stream_near`` keeps at most (a few hundred bytes each).
NEAR_CACHE_MAX = 8192
# The nodes whose links and items ``_links``, ``_items_made`` and ``_seen`` keep at most, each
# (working_set: what a long-serving process holds stays bounded however many nodes it reaches).
NODE_CACHE_MAX = 2 * WORKING_SET


def doc_place(doc: MemoryDoc) -> tuple[str, int] | None:
    """The document's (stream, position), None when it has no place in a stream."""
    if doc.stream is None or doc.position is None:
        return None
    return doc.stream, doc.position


class MemoryStore:
    """The tokenized documents of one project, their entity graph and visibility columns, kept
    in step under single-document updates (``MemoryIndex`` ranks them)."""

    def __init__(self) -> None:
        self.bm25 = BM25Index()
        # Sentence vectors by slot, when the semantic backend is on (empty otherwise).
        self.dense = DenseColumn()
        # The document in each slot (a restored index makes them from its columns on demand).
        self._slot_docs: Slots[MemoryDoc | None] = list[MemoryDoc | None]()
        # Each slot's tie-break key (``tiebreak.tie_key``), made once when its document is put:
        # sorts look it up rather than make it per comparison.
        self._ties: Slots[TieKey] = list[TieKey]()
        # Each slot's place in its stream, (stream, position), None when it has none: stream
        # neighbours read it without making the document.
        self._places: Slots[tuple[str, int] | None] = list[tuple[str, int] | None]()
        # The entity graph, nodes keyed by lower-cased entity id: the items about each node
        # (facts by subject, episodes by listed entity or by mention) and its edges. Each entry
        # holds its item's slot (slots are never reused): ranking checks visibility by slot.
        # node -> item key -> (slot, salience)
        self._items_of: Table[tuple[int, float]] = {}
        # identifier -> episode naming it -> (slot, salience)
        self._mentioned_by: Table[tuple[int, float]] = {}
        # node -> fact key -> (other node, slot)
        self._edges_of: Table[tuple[str, int]] = {}
        # object_ref -> fact key -> (subject node, slot)
        self._refs: Table[tuple[str, int]] = {}
        # subject node -> fact key -> (object_ref, slot)
        self._out_refs: Table[tuple[str, int]] = {}
        self._streams: MutableMapping[str, dict[int, str]] = {}
        self._titled: Counter[str] = Counter()  # title term -> documents whose title has it
        # (slot, window) -> the slots within ``window`` positions of it in its stream, each with
        # its step (``_stream_near``); emptied by every change and when it grows past its bound.
        self._near_cache: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
        # For one visibility at a time (its byte per slot): each node's visible neighbours and
        # the visible items about it, made on first use (``neighbours_seen``, ``items_seen``;
        # ``NODE_CACHE_MAX`` nodes at most); emptied by every change. A server answers query
        # after query over one visibility, and activation reaches the same hubs each time.
        self._seen: tuple[bytes, dict[str, list[str]], dict[str, list[tuple[int, float]]]] = (
            b"",
            {},
            {},
        )
        # What those are filtered from, visibility not applied: each node's links (``_links``)
        # and the items about it (``_items_made``), made on first use and kept across changes,
        # a node's dropped when a change touches its tables (every node's links when an entity
        # appears or goes: that decides which object values link). The ranking after a write
        # filters them again rather than reading the tables.
        self._node_links: dict[str, tuple[tuple[str, int], ...]] = {}
        self._node_items: dict[str, tuple[tuple[int, float], ...]] = {}
        # The live view (``masks`` at an instant) and the instants it holds for, those between
        # which no item starts or ends (``_LiveView``). Emptied by every change.
        self._live: _LiveView | None = None
        # The related-terms table's rows of this index's terms, and the vocabulary they are of.
        self._corpus: tuple[int, object, CorpusRows] | None = None
        # A restored index's payloads of stored slots, made at once from the columns.
        self._stored_payloads: Callable[[Sequence[int]], list[object]] | None = None
        # Per-slot columns for visibility, kept in step with the documents (grown by doubling).
        self._arrays = {name: slot_column(fill, 64) for name, fill in VISIBILITY_FILL.items()}

    def __len__(self) -> int:
        return len(self.bm25)

    @property
    def docs(self) -> Mapping[str, MemoryDoc]:
        """The documents by key."""
        return _Docs(self)

    def upsert(self, doc: MemoryDoc) -> None:
        self._near_cache.clear()
        self._seen = (b"", {}, {})
        self._live = None
        old = self.docs.get(doc.key)
        # The nodes whose kept links and items this change may alter (none kept, none to drop:
        # an index being built keeps none), and which of them are entities before it.
        nodes = set[str]()
        if self._node_links or self._node_items:
            nodes = _nodes_touched(doc) | (set() if old is None else _nodes_touched(old))
        entities = [node for node in nodes if self.is_entity(node)]
        if old is not None:
            self._unlink(old)
        slot = self.bm25.upsert(doc.key, doc.tokens)
        self.dense.forget(slot)
        while len(self._slot_docs) <= slot:
            self._slot_docs.append(None)
            self._ties.append(EMPTY_TIE)
            self._places.append(None)
        self._slot_docs[slot] = doc
        self._ties[slot] = tie_key(doc)
        self._places[slot] = place = doc_place(doc)
        self._link(doc, slot)
        if place is not None:
            stream = self._streams.setdefault(place[0], {})
            holder = stream.get(place[1])
            # Two episodes at one position: the first by ``tie_key`` holds it, whichever came last.
            if holder is None or holder == doc.key or tie_key(doc) < tie_key(self.docs[holder]):
                stream[place[1]] = doc.key
        self._titled.update(set(doc.title_terms))
        self._set_columns(slot, doc)
        for node in nodes:
            self._node_links.pop(node, None)
            self._node_items.pop(node, None)
        if entities != [node for node in nodes if self.is_entity(node)]:
            self._node_links.clear()

    def _link(self, doc: MemoryDoc, slot: int) -> None:
        item = (slot, doc.salience)
        if doc.kind == "fact" and doc.subject:
            self._items_of.setdefault(doc.subject.lower(), {})[doc.key] = item
        if doc.kind == "episode":
            for entity in doc.entities:
                self._items_of.setdefault(entity.lower(), {})[doc.key] = item
            for name in doc.mentions:
                self._mentioned_by.setdefault(name, {})[doc.key] = item
        if doc.edge:
            a, b = (end.lower() for end in doc.edge)
            self._edges_of.setdefault(a, {})[doc.key] = (b, slot)
            self._edges_of.setdefault(b, {})[doc.key] = (a, slot)
        elif doc.object_ref and doc.subject:
            subject = doc.subject.lower()
            self._refs.setdefault(doc.object_ref, {})[doc.key] = (subject, slot)
            self._out_refs.setdefault(subject, {})[doc.key] = (doc.object_ref, slot)

    def _unlink(self, doc: MemoryDoc) -> None:
        if doc.subject:
            self._items_of.get(doc.subject.lower(), {}).pop(doc.key, None)
        for entity in doc.entities:
            self._items_of.get(entity.lower(), {}).pop(doc.key, None)
        for name in doc.mentions:
            self._mentioned_by.get(name, {}).pop(doc.key, None)
        if doc.edge:
            for end in doc.edge:
                self._edges_of.get(end.lower(), {}).pop(doc.key, None)
        if doc.object_ref:
            self._refs.get(doc.object_ref, {}).pop(doc.key, None)
            if doc.subject:
                self._out_refs.get(doc.subject.lower(), {}).pop(doc.key, None)
        place = doc_place(doc)
        if place is not None:
            stream = self._streams.get(place[0], {})
            if stream.get(place[1]) == doc.key:
                del stream[place[1]]
        for term in set(doc.title_terms):
            left = self._titled[term] - 1
            if left > 0:
                self._titled[term] = left
            else:
                del self._titled[term]  # no title has it any more

    def recorded_by(self, instant: float) -> list[str]:
        """The keys of the documents recorded by ``instant`` (POSIX seconds), in slot order,
        read from the per-slot columns (no document is made)."""
        n = self.bm25.n_slots
        a = self._arrays
        slots = np.flatnonzero(a["present"][:n] & (a["recorded"][:n] <= instant)).tolist()
        keys = self.bm25.key
        return [key for key in map(keys, slots) if key is not None]

    def ranked_payloads(
        self, keys: Sequence[str], slots: Sequence[int]
    ) -> RankedPayloads[object] | TakenPayloads[object]:
        """The payloads of the documents at ``slots`` (whose keys are ``keys``) as they are now:
        those of documents in memory are taken now, those a restored index makes from its
        stored columns (which never change) when the packer reaches them."""
        at = list(slots)
        docs = self._slot_docs
        stored = self._stored_payloads
        if stored is None or not isinstance(docs, SlotList):
            taken = map(attrgetter("payload"), map(docs.__getitem__, at))
            return TakenPayloads(zip(keys, taken, strict=True))
        held = {n: docs[s].payload for n, s in enumerate(at) if not docs.made(s)}

        def read(positions: Sequence[int]) -> list[object]:
            wanted = [n for n in positions if n not in held]
            found = dict(zip(wanted, stored([at[n] for n in wanted]), strict=True))
            return [held[n] if n in held else found[n] for n in positions]

        return RankedPayloads(keys, read)

    def docs_ahead(self, slots: Iterable[int]) -> None:
        """Makes at once the stored payloads of the documents at ``slots`` that a restored index
        makes from its columns, so that each of those documents, made next, finds its payload
        kept: one read of the columns for all of them, not one each (about 5 times the work).
        Nothing to do for documents held in memory."""
        docs, stored = self._slot_docs, self._stored_payloads
        if stored is None or not isinstance(docs, SlotList):
            return
        wanted = [slot for slot in slots if docs.made(slot)]
        if len(wanted) > 1:
            stored(wanted)

    def ranked_ties(self, keys: Sequence[str], slots: Sequence[int]) -> Mapping[str, TieKey]:
        """The tie-break keys of the documents at ``slots`` by key, as ``ranked_payloads``
        reads payloads: a restored index makes its stored slots' keys when they are reached."""
        at = list(slots)
        ties = self._ties
        if not isinstance(ties, SlotList):
            return dict(zip(keys, map(ties.__getitem__, at), strict=True))
        held = {n: ties[s] for n, s in enumerate(at) if not ties.made(s)}
        return RankedPayloads(
            keys,
            lambda positions: [held[n] if n in held else ties.stored(at[n]) for n in positions],
        )

    def _stream_near(self, slot: int, window: int) -> tuple[tuple[int, int], ...]:
        """The slots of the documents within ``window`` positions of ``slot``'s in its stream,
        each with its step: 2 x (offset - 1), plus 1 after it (0: before it), nearest first,
        before after; none when the document has no place. Kept until the next change."""
        cache = self._near_cache
        found = cache.get((slot, window))
        if found is not None:
            return found
        place = self._places[slot]
        near: list[tuple[int, int]] = []
        if place is not None:
            stream, position, slot_of = self._streams.get(place[0], {}), place[1], self.bm25.slots
            for offset in range(1, window + 1):
                for step, delta in ((2 * offset - 2, -offset), (2 * offset - 1, offset)):
                    key = stream.get(position + delta)
                    neighbour = None if key is None else slot_of.get(key)
                    if neighbour is not None:
                        near.append((neighbour, step))
        if len(cache) >= NEAR_CACHE_MAX:
            cache.clear()
        found = cache[(slot, window)] = tuple(near)
        return found

    def is_entity(self, node: str) -> bool:
        """Whether ``node`` (lower-cased) is an entity of the graph: the subject of a fact, an
        end of an edge or an entity an episode lists."""
        return holds(self._items_of, node) or holds(self._edges_of, node)

    def _neighbours(self, node: str, visible: bytes) -> list[str]:
        """The entities one visible edge away from ``node``, both directions: linked edges, and
        facts whose object value names an entity (either end). ``visible``: one byte per slot."""
        return [other for other, slot in self._links(node) if visible[slot]]

    def _links(self, node: str) -> tuple[tuple[str, int], ...]:
        """``_neighbours``' candidates, visible or not: (other node, slot of the fact between)."""
        found = self._node_links.get(node)
        if found is None:
            out = [*entries(self._edges_of, node), *entries(self._refs, node)]
            out.extend(
                (ref, slot) for ref, slot in entries(self._out_refs, node) if self.is_entity(ref)
            )
            found = _kept(self._node_links, node, tuple(out))
        return found

    def _seen_for(
        self, visible: bytes
    ) -> tuple[dict[str, list[str]], dict[str, list[tuple[int, float]]]]:
        seen = self._seen
        if seen[0] != visible:  # one comparison of the bytes, a small share of a ranking
            seen = self._seen = (visible, {}, {})
        return seen[1], seen[2]

    def neighbours_seen(self, visible: bytes) -> Callable[[str], list[str]]:
        """``_neighbours`` over ``visible``, each node's made once while neither the documents
        nor the visibility change."""
        made = self._seen_for(visible)[0]

        def neighbours(node: str) -> list[str]:
            found = made.get(node)
            if found is None:
                # Each once: activation keeps the strongest value that reaches a node, so a
                # second edge to it changes nothing.
                found = _kept(made, node, list(dict.fromkeys(self._neighbours(node, visible))))
            return found

        return neighbours

    def items_seen(self, node: str, visible: bytes) -> list[tuple[int, float]]:
        """The visible ones of ``_items_about(node)``, in its order, as ``neighbours_seen`` keeps
        them."""
        made = self._seen_for(visible)[1]
        found = made.get(node)
        if found is None:
            found = _kept(made, node, [item for item in self._items_made(node) if visible[item[0]]])
        return found

    def graph_warm(self) -> int:
        """Makes the links and the items of every node of the entity graph now (up to
        ``NODE_CACHE_MAX``), as a build from the rows ends, so that no ranking pays for them
        when it first reaches a node; answers how many nodes were made."""
        tables = (self._items_of, self._mentioned_by, self._edges_of, self._refs, self._out_refs)
        nodes = list(islice(dict.fromkeys(chain.from_iterable(tables)), NODE_CACHE_MAX))
        for node in nodes:
            self._links(node)
            self._items_made(node)
        return len(nodes)

    def _items_made(self, node: str) -> tuple[tuple[int, float], ...]:
        """``_items_about(node)``, kept (``_node_items``)."""
        found = self._node_items.get(node)
        if found is None:
            found = _kept(self._node_items, node, tuple(self._items_about(node)))
        return found

    def _items_about(self, node: str) -> Iterable[tuple[int, float]]:
        """The items about an entity as (slot, salience): facts of which it is the subject,
        episodes that list it or name it."""
        items = entries(self._items_of, node)
        if not holds(self._mentioned_by, node):
            return items
        # One entry per item (a document has one (slot, salience) in every table), in the
        # order of a merge of the two dicts: the mentions first.
        return dict.fromkeys([*entries(self._mentioned_by, node), *items])

    # -- visibility ----------------------------------------------------------------------

    def _set_columns(self, slot: int, doc: MemoryDoc) -> None:
        a = self._arrays
        if slot >= len(a["present"]):
            size = grown(len(a["present"]), slot + 1)
            for name, column in a.items():
                longer = slot_column(VISIBILITY_FILL[name], size)
                longer[: len(column)] = column
                a[name] = longer
        a["present"][slot] = True
        a["fact"][slot] = doc.kind == "fact"
        a["recorded"][slot] = doc.recorded_at
        a["start"][slot] = doc.valid_from
        a["until"][slot] = doc.valid_until
        a["closed"][slot] = doc.closed_at
        a["tie"][slot] = digest_prefix(doc.digest)

    def masks(self, visibility: Visibility) -> tuple[np.ndarray, np.ndarray]:
        """(visible, stale) per slot. Stale: a fact hidden because it had been closed. The live
        view at an instant is the one at the last (the same arrays, not to be written to) until
        some item starts or ends in between, or the documents change."""
        now = visibility.now
        if now is None or visibility != Visibility(now=now):
            return self._masks(visibility)
        kept = self._live
        if kept is not None and kept.holds_at(now, self._arrays, self.bm25.n_slots):
            return kept.visible, kept.stale
        visible, stale = self._masks(visibility)
        self._live = _LiveView(now, visible, stale)
        return visible, stale

    def shown(self, visible: np.ndarray) -> bytes:
        """``visible`` as one byte per slot (looked up item by item, bytes are much faster than
        numpy), made once for the live view ``masks`` keeps."""
        kept = self._live
        if kept is not None and kept.visible is visible:
            if kept.shown is None:
                kept.shown = visible.tobytes()
            return kept.shown
        return visible.tobytes()

    def _masks(self, visibility: Visibility) -> tuple[np.ndarray, np.ndarray]:
        n = self.bm25.n_slots
        a = {name: column[:n] for name, column in self._arrays.items()}
        fact, episode = a["fact"], a["present"] & ~a["fact"]
        if visibility.as_of is None and visibility.known_at is None:
            if visibility.now is None:
                open_now = a["until"] == INF
                stale = fact & ~open_now
            else:
                open_now = valid_at(a["start"], a["until"], visibility.now)
                stale = fact & (a["until"] <= visibility.now)
            if visibility.include_superseded:
                return a["present"].copy(), np.zeros_like(stale)
            return episode | (fact & open_now), stale
        known = INF if visibility.known_at is None else visibility.known_at
        recorded = a["recorded"] <= known
        if visibility.as_of is None:
            # Still open as known then: a closure learned after ``known_at`` had not happened.
            open_then = (a["until"] == INF) | (a["closed"] > known)
            facts_seen = fact & recorded & open_then
            stale = fact & recorded & ~open_then
            episodes_seen = episode & recorded
        else:
            at = visibility.as_of
            if visibility.fact_keys is None:
                facts_seen = fact & fact_visible(
                    a["start"], a["until"], a["recorded"], a["closed"], as_of=at, known_at=known
                )
            else:
                chosen = np.zeros_like(fact)
                for key in visibility.fact_keys:
                    slot = self.bm25.slot(key)
                    if slot is not None:
                        chosen[slot] = True
                facts_seen = fact & recorded & chosen
            stale = fact & recorded & (a["start"] <= at) & ~facts_seen
            # (an episode's start column holds when it occurred)
            episodes_seen = episode & episode_visible(
                a["start"], a["recorded"], as_of=at, known_at=known
            )
        if visibility.include_superseded:
            return (fact & recorded) | episodes_seen, np.zeros_like(stale)
        return facts_seen | episodes_seen, stale


def _nodes_touched(doc: MemoryDoc) -> set[str]:
    """The nodes whose entries in the entity tables ``doc`` makes (``_link``), as keyed there."""
    nodes = {entity.lower() for entity in doc.entities} | set(doc.mentions)
    if doc.subject:
        nodes.add(doc.subject.lower())
    if doc.edge:
        nodes.update(end.lower() for end in doc.edge)
    if doc.object_ref:
        nodes.add(doc.object_ref)
    return nodes


def _kept(cache: dict[str, T], node: str, value: T) -> T:
    """``value`` kept in ``cache`` for ``node`` (at most ``NODE_CACHE_MAX`` nodes)."""
    return kept(cache, node, value, NODE_CACHE_MAX)


@dataclass(eq=False)
class _LiveView:
    """``MemoryStore.masks`` at the instant ``at``, and the instants it holds for: from
    ``since`` (``at`` until an earlier instant asks) up to ``until``. Each end is found when
    an instant past ``at`` on its side first asks for the view: a view made right after a write
    is often the only one before the next write, and finding an end costs more than the view."""

    at: float
    visible: np.ndarray
    stale: np.ndarray
    shown: bytes | None = None
    since: float | None = None
    until: float | None = None

    def holds_at(self, now: float, arrays: dict[str, np.ndarray], n: int) -> bool:
        """Whether the view at ``now`` is this one: no item starts or ends between ``at`` and
        ``now`` (the rule compares the instant with those columns alone)."""
        columns = arrays["start"][:n], arrays["until"][:n]
        if now >= self.at:
            if self.until is None:
                self.until = min(float(c[c > self.at].min(initial=INF)) for c in columns)
            return now < self.until
        if self.since is None:
            self.since = max(float(c[c <= self.at].max(initial=-INF)) for c in columns)
        return now >= self.since
