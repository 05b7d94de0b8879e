"""Canonical hashing of graph records and RFC 6962 Merkle roots.

A record's canonical form is its JSON canonicalised by RFC 8785 (sorted keys, fixed number and
string encoding; memoryproject.domain.canonical), so the same record always hashes to the same
SHA-256 whatever produced it.
The Merkle tree follows RFC 6962 (Certificate Transparency): a leaf hashes ``0x00 || data``, an
inner node ``0x01 || left || right``, and a list whose size is not a power of two splits at the
largest power of two below its size. Domain separation keeps a leaf from posing as a node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from memoryproject.domain.canonical import canonical_json

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"


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
