"""The compiler's index snapshot format (graph_app/domain/snapshot_file.py, index_columns.py,
index_items.py): an index comes back exactly as it was written, and a file that is not a whole
snapshot signed with the key, or that asks for anything but numbers, is refused unread."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from blake3 import blake3

from graph_app.domain import index_items
from graph_app.domain.index_columns import index_columns, index_restore
from graph_app.domain.index_items import ITEM_COLUMNS, IndexItem
from graph_app.domain.memory_doc import MemoryDoc
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.memory_store import Visibility
from graph_app.domain.profiles import PROFILES
from graph_app.domain.snapshot_file import (
    MAGIC,
    SnapshotRefused,
    snapshot_file_read,
    snapshot_file_write,
)

KEY = b"k" * 32
WHEN = datetime(2026, 4, 20, 9, 30, 15, 123456, tzinfo=UTC)
# What a BM25 index computes when queried, not what it holds.
# (and the slot by key, made from the keys when first asked for: compared below as ``slots``)
BM25_CACHES = {"_dirty", "_idf", "_avgdl", "_norms", "_contributions", "_slot_of_made"}
# (``docs`` is a view of the slots, compared below with the rest.)
INDEX_STATE = {
    "bm25", "_slot_docs", "_items_of", "_mentioned_by", "_edges_of", "_refs",
    "_out_refs", "_streams", "_titled", "_arrays", "_ties", "_places",
}  # fmt: skip
# Not stored: the semantic backend's sentence vectors, made again for every document when an
# index restored with the backend on is refreshed (graph_app/index_cache.py).
NOT_STORED = {"dense"}
# Not state: how a restored index reads its stored slots' payloads from the columns.
NOT_STORED |= {"_stored_payloads"}
# Caches: the related-terms table's rows of the index's terms; the stream neighbourhoods; the
# graph as one visibility shows it, and each node's links and items it is filtered from; the
# live view.
NOT_STORED |= {"_corpus", "_near_cache", "_seen", "_node_links", "_node_items", "_live"}
BM25_STATE = {"k1", "b", "epsilon", "_keys", "_doc_tokens", "_lengths"}
BM25_STATE |= {"_postings", "_total_len"}


def _fact(n: int, subject: str, obj: str, *, closed: bool = False, **extra) -> MemoryDoc:
    fields = (
        *(f"f{n}", subject, "depends_on", obj, WHEN, WHEN if closed else None, "active"),
        *(None if n % 2 else f"ep{n}", f"{n:064x}"),
    )
    item = IndexItem(
        kind="fact",
        id=f"f{n}",
        citation=f"[F:f{n}]",
        line=f"- [F:f{n}] {subject} depends_on {obj} ✓",
        keep=9,
        section="Facts",
        order=(0.0, 0),
        fact_fields=fields,
        line_tokens=12,
        sha256=f"{n:064x}",
    )
    return MemoryDoc(
        key=f"fact:f{n}",
        kind="fact",
        tokens=(subject, "depend", obj, subject),
        entities=(subject, obj),
        subject=subject,
        recorded_at=WHEN.timestamp() + n,
        valid_from=WHEN.timestamp(),
        valid_until=WHEN.timestamp() + 10 if closed else float("inf"),
        salience=0.5,
        payload=item,
        **extra,
    )


def _episode(n: int, text: str, **extra) -> MemoryDoc:
    item = IndexItem(
        kind="episode",
        id=f"ep{n}",
        citation=f"[E:ep{n}]",
        line=f"- [E:ep{n}] {text}",
        keep=10,
        section="Episodes 2026-04-20",
        order=(WHEN.timestamp(), n),
        external_id=None if n % 2 else f"ADR-{n}",
        line_tokens=-1,
        sha256=f"{n:064x}",
        # counted for some episodes, not for others (an item indexed before they were)
        preview_tokens=() if n % 3 == 0 else (4, n, 2, 3),
    )
    return MemoryDoc(
        key=f"episode:ep{n}",
        kind="episode",
        tokens=tuple(text.lower().split()),
        recorded_at=WHEN.timestamp() + n,
        valid_from=WHEN.timestamp(),
        salience=1.0,
        payload=item,
        **extra,
    )


@pytest.fixture(params=["sha256 digests", "other digests"])
def index(request) -> MemoryIndex:
    """Facts with edges and with entity-like object values, episodes in a stream (two at one
    position), titled and naming identifiers, and documents replaced after they were indexed;
    their content digests SHA-256 in hex (stored as bytes) or not (stored as strings)."""
    index = MemoryIndex()
    if request.param == "sha256 digests":
        upsert = index.upsert

        def digested(doc: MemoryDoc) -> None:
            upsert(replace(doc, digest=hashlib.sha256(doc.key.encode()).hexdigest()))

        index.upsert = digested  # type: ignore[method-assign]
    docs = [
        _fact(1, "payment_service", "ledger_store", edge=("payment_service", "ledger_store")),
        _fact(2, "payment_service", "AuthService", object_ref="authservice"),
        _fact(3, "authservice", "jwt", closed=True),
        _episode(4, "payment_service keeps JWT", entities=("payment_service",)),
        _episode(5, "nate has a turtle named Shelly", stream="chat", position=1),
        _episode(6, "maria went to spain", stream="chat", position=2, title_terms=("maria",)),
        _episode(7, "a second turn\x00 at one place", stream="chat", position=2),
        _episode(8, "ledger_store owns the ledger", mentions=("ledger_store",)),
    ]
    for doc in docs:
        index.upsert(doc)
    # Replaced: new words, another entity, out of its stream position.
    index.upsert(_fact(2, "payment_service", "billing_api", edge=("payment_service", "x")))
    index.upsert(_episode(5, "nate has two turtles", stream="chat", position=9))
    vars(index).pop("upsert", None)
    return index


def test_sha256_digests_are_stored_as_bytes_and_come_back_as_their_hex(index):
    _, arrays = index_columns(index, ITEM_COLUMNS)
    digests = [d.digest for d in index.docs.values()]
    hexed = all(len(d) == 64 for d in digests)
    assert ("doc.digest.sha256" in arrays, "doc.digest" in arrays) == (hexed, not hexed)
    restored = _restored(index)
    assert [d.digest for d in restored.docs.values()] == digests
    assert list(restored._ties) == list(index._ties)


def _restored(index: MemoryIndex) -> MemoryIndex:
    meta, arrays = index_columns(index, ITEM_COLUMNS)
    out = io.BytesIO()
    snapshot_file_write(out, {"index": meta}, arrays, key=KEY)
    header, read = snapshot_file_read(out.getvalue(), key=KEY)
    return index_restore(header["index"], read, ITEM_COLUMNS)


def test_a_restored_index_holds_every_attribute_of_the_one_written(index):
    restored = _restored(index)
    assert restored.bm25._slot_of_made is None  # the slot by key: made when first asked for
    assert set(vars(index)) - NOT_STORED == set(vars(restored)) - NOT_STORED == INDEX_STATE, (
        "a new attribute to store"
    )
    assert len(restored.dense) == 0
    assert set(vars(index.bm25)) - BM25_CACHES == BM25_STATE, "a new attribute to store"
    for name in INDEX_STATE - {"bm25", "_arrays"}:
        assert getattr(restored, name) == getattr(index, name), name
    assert restored.docs == index.docs and list(restored.docs) == list(index.docs)
    n = index.bm25.n_slots
    for name in BM25_STATE - {"_lengths"}:
        assert getattr(restored.bm25, name) == getattr(index.bm25, name), name
    assert restored.bm25.slots == index.bm25.slots
    # (lengths: an array with room to grow past the slots)
    assert np.array_equal(restored.bm25._lengths[:n], index.bm25._lengths[:n])
    for name, column in index._arrays.items():
        assert np.array_equal(restored._arrays[name][:n], column[:n]), name
    # MemoryDoc leaves its payload out of equality: the items, compared on their own.
    assert [d and d.payload for d in restored._slot_docs] == [
        d and d.payload for d in index._slot_docs
    ]


@pytest.mark.parametrize("kept", [4096, 2])
def test_a_restored_index_keeps_the_items_it_made_and_they_stay_the_ones_written(
    index, kept, monkeypatch
):
    monkeypatch.setattr(index_items, "ITEMS_KEPT", kept)
    restored = _restored(index)
    slots = list(range(index.bm25.n_slots))
    written = [index._slot_docs[s].payload for s in slots]
    first = restored._stored_payloads(slots)
    again = restored._stored_payloads(slots[::-1])[::-1]
    assert first == again == written
    assert all(a is b for a, b in zip(first, again, strict=True)) is (kept >= len(slots))


def test_documents_read_ahead_are_made_from_one_read_of_the_columns(index, monkeypatch):
    """Spreading activation and feedback make a few documents each: a restored index reads
    their payloads in one go first, so that making each one reads nothing more."""
    restored = _restored(index)
    reads: list[int] = []
    made = index_items._StoredItems._made

    def counted(self, slots):
        reads.append(len(slots))
        return made(self, slots)

    monkeypatch.setattr(index_items._StoredItems, "_made", counted)
    slots = [0, 3, 5, 6]
    restored.docs_ahead(slots)
    assert reads == [len(slots)]
    docs = [restored._slot_docs[s] for s in slots]
    assert reads == [len(slots)], "each document found its payload made"
    assert [d.payload for d in docs] == [index._slot_docs[s].payload for s in slots]
    # written since the snapshot: held in memory, nothing to read
    restored.upsert(_episode(9, "written after the snapshot"))
    restored.docs_ahead([index.bm25.n_slots, 1, 2])
    assert reads[1:] == [2]
    index.docs_ahead(slots)  # an index built in memory reads no columns


@pytest.mark.parametrize(
    "visibility",
    [
        Visibility(),
        Visibility(include_superseded=True),
        Visibility(as_of=WHEN.timestamp() + 5, known_at=WHEN.timestamp() + 3),
    ],
)
@pytest.mark.parametrize("query", ["what does payment_service depend on", "maria spain turtle"])
def test_a_restored_index_ranks_as_the_one_written(index, query, visibility):
    restored = _restored(index)
    for profile in PROFILES.values():
        assert restored.rank(query, visibility, profile.rank) == index.rank(
            query, visibility, profile.rank
        )


def test_a_restored_index_goes_on_indexing_like_the_one_written(index):
    restored = _restored(index)
    for each in (index, restored):
        each.upsert(_fact(9, "ledger_store", "postgres", edge=("ledger_store", "postgres")))
        each.upsert(_episode(6, "maria moved to lisbon", stream="chat", position=2))
    query = "ledger_store postgres lisbon"
    assert restored.rank(query, Visibility()) == index.rank(query, Visibility())
    assert restored._streams == index._streams and restored._titled == index._titled


@pytest.mark.parametrize("forged", ["a negative count", "an end past the counts"])
def test_preview_counts_that_do_not_fit_the_items_are_refused(index, forged):
    meta, arrays = index_columns(index, ITEM_COLUMNS)
    arrays = dict(arrays)
    name = "payload.preview_tokens" + (".ends" if forged == "an end past the counts" else "")
    arrays[name] = arrays[name].copy()
    if forged == "a negative count":
        arrays[name][0] = -1
    else:
        arrays[name][-1] += 1
    with pytest.raises(ValueError, match="preview token counts"):
        index_restore(meta, arrays, ITEM_COLUMNS)


def test_document_keys_that_repeat_are_refused(index):
    meta, arrays = index_columns(index, ITEM_COLUMNS)
    arrays = dict(arrays)
    arrays["doc.key"] = arrays["doc.key"].copy()
    arrays["doc.key"][1] = arrays["doc.key"][0]  # two slots, one key
    with pytest.raises(ValueError, match="not one per document"):
        index_restore(meta, arrays, ITEM_COLUMNS)


def test_postings_out_of_order_within_a_run_are_refused(index):
    """Each term's run of slots is searched by bisection: one out of order is refused (a step
    down from one run into the next is not)."""
    meta, arrays = index_columns(index, ITEM_COLUMNS)
    ends, slots = arrays["postings.ends"], arrays["postings.slot"]
    start = next(int(a) for a, b in zip([0, *ends[:-1]], ends, strict=True) if b - a >= 2)
    arrays = dict(arrays)
    arrays["postings.slot"] = slots.copy()
    arrays["postings.slot"][[start, start + 1]] = slots[[start + 1, start]]
    with pytest.raises(ValueError, match="a run out of order"):
        index_restore(meta, arrays, ITEM_COLUMNS)


def test_times_come_back_exact_and_in_utc(index):
    item = _restored(index).docs["fact:f3"].payload
    assert isinstance(item, IndexItem)
    assert item.fact_fields[4] == WHEN and item.fact_fields[4].tzinfo is UTC
    assert item.fact_fields[5] == WHEN  # the closed fact's valid_until


def test_an_item_with_a_time_in_another_zone_is_not_stored():
    doc = _fact(1, "payment_service", "ledger_store")
    assert isinstance(doc.payload, IndexItem)
    fields = list(doc.payload.fact_fields)
    fields[4] = WHEN.astimezone(timezone(timedelta(hours=2)))  # the same instant, in Paris
    index = MemoryIndex()
    index.upsert(replace(doc, payload=replace(doc.payload, fact_fields=tuple(fields))))
    with pytest.raises(TypeError, match="UTC"):
        index_columns(index, ITEM_COLUMNS)


def test_strings_holding_a_nul_come_back_whole(index):
    restored = _restored(index)
    item = restored.docs["episode:ep7"].payload
    assert isinstance(item, IndexItem)
    assert item.line == "- [E:ep7] a second turn\x00 at one place"


# --- the file ----------------------------------------------------------------------------------


def _file(header=None, arrays=None, key=KEY) -> bytes:
    out = io.BytesIO()
    arrays = {"a": np.arange(5, dtype=np.int64), "b": np.array([0.5, np.inf])} | (arrays or {})
    snapshot_file_write(out, header or {"x": 1}, arrays, key=key)
    return out.getvalue()


def test_the_arrays_lie_at_aligned_offsets_for_mapping_later():
    data = _file()
    header, arrays = snapshot_file_read(data, key=KEY)
    assert header == {"x": 1}
    assert arrays["a"].tolist() == [0, 1, 2, 3, 4] and arrays["b"].tolist() == [0.5, np.inf]
    for array in arrays.values():
        offset = array.__array_interface__["data"][0] - np.frombuffer(data, np.uint8).ctypes.data
        assert offset % 64 == 0


def test_a_file_signed_with_another_key_is_refused_before_it_is_read():
    with pytest.raises(SnapshotRefused, match="signature mismatch"):
        snapshot_file_read(_file(key=b"another key, 32 bytes long......"), key=KEY)
    garbage = MAGIC + b"\0" * 32 + b"\xff" * 200  # would not even parse
    with pytest.raises(SnapshotRefused, match="signature mismatch"):
        snapshot_file_read(garbage, key=KEY)


@pytest.mark.parametrize(
    "damage",
    [lambda d: d[:-1], lambda d: d[:40], lambda d: b"", lambda d: d + b"\0"],
    ids=["last byte cut", "header cut", "empty", "byte added"],
)
def test_a_damaged_file_is_refused(damage):
    with pytest.raises(SnapshotRefused):
        snapshot_file_read(damage(_file()), key=KEY)


def _signed(document: dict, data: bytes = b"") -> bytes:
    """A file made by hand and signed with the key: what a holder of the key could forge."""
    text = json.dumps(document).encode()
    body = len(text).to_bytes(8, "little") + text
    body += b"\0" * (-(len(MAGIC) + 32 + len(body)) % 64) + data
    return MAGIC + blake3(body, key=KEY).digest() + body


@pytest.mark.parametrize(
    "place",
    [
        ["|O", 1, 0],
        ["<U8", 1, 0],
        [["<i8"], 1, 0],
        ["<i8", 2, 0],
        ["<i8", -1, 0],
        ["<i8", 1, 1.5],
        "numbers",
    ],
    ids=[
        "objects",
        "unicode",
        "not a dtype",
        "past the end",
        "negative",
        "not an offset",
        "not a place",
    ],
)
def test_a_signed_file_that_asks_for_anything_but_numbers_in_it_is_refused(place):
    with pytest.raises(SnapshotRefused):
        snapshot_file_read(_signed({"header": {}, "arrays": {"a": place}}, b"\0" * 8), key=KEY)


def test_an_array_of_objects_is_never_written():
    with pytest.raises(ValueError, match="not storable"):
        _file(arrays={"o": np.array(["x", None], dtype=object)})


def test_a_signed_header_nested_past_any_reason_is_refused():
    text = ("[" * 100_000 + "]" * 100_000).encode()  # deeper than the JSON parser recurses
    body = len(text).to_bytes(8, "little") + text
    forged = MAGIC + blake3(body, key=KEY).digest() + body
    with pytest.raises(SnapshotRefused):
        snapshot_file_read(forged, key=KEY)
