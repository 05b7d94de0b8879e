"""Canonical hashing of graph records and RFC 6962 Merkle roots.

A record's canonical form is its JSON canonicalised by RFC 8785 (sorted keys, fixed number and
string encoding), so the same record always hashes to the same SHA-256 whatever produced it.
The Merkle tree follows RFC 6962 (Certificate Transparency): a leaf hashes ``0x00 || data``, an
inner node ``0x01 || left || right``, and a list whose size is not a power of two splits at the
largest power of two below its size. Domain separation keeps a leaf from posing as a node.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring
from typing import Any, NamedTuple

import rfc8785

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"


_INT_LIMIT = 2**53 - 1


class _Unsupported(Exception):
    pass


@functools.lru_cache(maxsize=4096)
def number_json(value: float) -> str:
    """A float as RFC 8785 writes it."""
    # ECMAScript number formatting; records repeat few values (a confidence is mostly 1.0).
    return rfc8785.dumps(value).decode()


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif type(value) is str:
        out.append(encode_basestring(value))
    elif type(value) is int:
        if not -_INT_LIMIT <= value <= _INT_LIMIT:
            raise _Unsupported
        out.append(str(value))
    elif type(value) is float:
        out.append(number_json(value))
    elif type(value) is dict:
        keys = list(value)
        if not all(type(k) is str for k in keys):
            raise _Unsupported
        # RFC 8785 orders keys by UTF-16 code units; for ASCII keys that is plain order.
        if all(k.isascii() for k in keys):
            keys.sort()
        else:
            keys.sort(key=lambda k: k.encode("utf-16be", "surrogatepass"))
        out.append("{")
        for index, key in enumerate(keys):
            if index:
                out.append(",")
            out.append(encode_basestring(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif type(value) in (list, tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise _Unsupported


def canonical_json(record: Any) -> bytes:
    """RFC 8785 canonical JSON bytes of ``record`` (dicts, lists, str, int, float, bool, None).

    The ``rfc8785`` package defines the result. Integrity checks canonicalise every record of
    a project, so plain records take a fast path built on the C JSON string encoder (whose
    escaping is exactly RFC 8785's) and numbers still go through the package; anything
    unusual (big integers, subclasses, lone surrogates) is left to the package, which
    canonicalises it or raises its error. A property test holds both paths byte-identical.
    """
    try:
        flat = _flat(record) if type(record) is dict else None
        if flat is not None:
            return flat.encode("utf-8")
        out: list[str] = []
        _write(record, out)
        return "".join(out).encode("utf-8")
    except (_Unsupported, UnicodeEncodeError):
        return rfc8785.dumps(record)


@functools.lru_cache(maxsize=256)
def _key_order(keys: tuple[Any, ...]) -> tuple[tuple[str, str], ...] | None:
    """A record shape's keys in RFC 8785 order with their encoded prefix (``"key":``), when
    all are ASCII strings (whose UTF-16 order is plain order); records share few shapes."""
    if not all(type(k) is str and k.isascii() for k in keys):
        return None
    return tuple((k, encode_basestring(k) + ":") for k in sorted(keys))


def _flat(record: dict[Any, Any]) -> str | None:
    """A dict under ASCII keys whose values are plain scalars, lists and such dicts (a graph
    record's, a change's or a trace's form) in one pass; None when the record holds anything
    else (the general writer takes it)."""
    order = _key_order(tuple(record))
    if order is None:
        return None
    parts = []
    for key, head in order:
        value = record[key]
        if type(value) is str:
            parts.append(head + encode_basestring(value))
            continue
        text = _compact(value)
        if text is None:
            return None
        parts.append(head + text)
    return "{" + ",".join(parts) + "}"


def _compact(value: Any) -> str | None:
    """``value`` as ``_flat`` writes it, or None when it cannot."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is float:
        return number_json(value)
    if kind is int and -_INT_LIMIT <= value <= _INT_LIMIT:
        return str(value)
    if kind is dict:
        return _flat(value)
    if kind is list or kind is tuple:
        items = []
        for item in value:
            text = _compact(item)
            if text is None:
                return None
            items.append(text)
        return "[" + ",".join(items) + "]"
    return None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_sha256(record: Any) -> str:
    """SHA-256 (hex) of the record's canonical JSON."""
    return sha256_hex(canonical_json(record))


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


class RecordDigests(NamedTuple):
    """Records as verification compares them, column by column (one entry per record):
    id, stored hash, revision, SHA-256 (hex) of the canonical JSON and its Merkle leaf hash."""

    ids: list[str]
    stored: list[Any]
    revisions: list[Any]
    computed: list[str]
    leaf_hashes: list[bytes]


def record_digests(records: Iterable[tuple[str, Any, Any, bytes]]) -> RecordDigests:
    """The digests of (id, stored hash, revision, canonical JSON) records."""
    digests = RecordDigests([], [], [], [], [])
    ids, stored, revisions, computed, leaves = digests
    for record_id, stored_hash, revision, data in records:
        ids.append(record_id)
        stored.append(stored_hash)
        revisions.append(revision)
        computed.append(sha256_hex(data))
        leaves.append(leaf_hash(data))
    return digests


def merkle_root_of_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """RFC 6962 Merkle Tree Hash from the leaf hashes, computed bottom-up.

    Pairing neighbours level by level and carrying a lone last node up unchanged builds exactly
    the tree of RFC 6962's recursive split (the left subtree is always the largest power of two),
    without recursion or slicing, so it stays fast for hundreds of thousands of leaves.
    """
    if not hashes:
        return hashlib.sha256(b"").digest()
    level = list(hashes)
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def merkle_root(leaves: Iterable[bytes]) -> str:
    """RFC 6962 Merkle Tree Hash (hex) of the leaf data, in the given order."""
    return merkle_root_of_leaf_hashes([leaf_hash(data) for data in leaves]).hex()


def merkle_root_reference(leaves: Sequence[bytes]) -> str:
    """RFC 6962's recursive definition, verbatim; used to cross-check the fast version."""

    def mth(items: Sequence[bytes]) -> bytes:
        n = len(items)
        if n == 0:
            return hashlib.sha256(b"").digest()
        if n == 1:
            return leaf_hash(items[0])
        k = 1
        while k * 2 < n:
            k *= 2
        return node_hash(mth(items[:k]), mth(items[k:]))

    return mth(leaves).hex()
