"""RFC 6962 inclusion proofs of graph records, and the offline check of a citation bundle.

The graph's Merkle root (``memoryproject.domain.hashing.merkle_root``: facts by id, then episodes by
id, each leaf a record's canonical JSON) commits to every record. An inclusion proof (RFC 6962
§2.1.1, "Merkle audit path") is the list of sibling hashes from a leaf up to that root, so
anyone holding a record, its index, the tree size and the root can recompute the root without
the rest of the memory. ``verify_inclusion`` is the verification algorithm of RFC 9162
§2.1.3.2 (RFC 6962's successor spells out what RFC 6962 left to implementations).

``bundle_problems`` checks a citation bundle (``manage.py export_sources``, ``POST
/v1/graph/compile`` with ``with_proofs``) item by item: its text is canonical JSON, its
``sha256``, id, kind and times are the text's, and its proof leads to the bundle's root; with
the signing key, also the root's HMAC. Pure Python: a third party needs no database.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from memoryproject.domain.canonical import canonical_json
from memoryproject.domain.hash_chain import checkpoint_mac, checkpoint_mac_matches
from memoryproject.domain.hashing import leaf_hash, node_hash

#: The schema a bundle declares; a verifier refuses any other.
BUNDLE_FORMAT = "memory-citation-bundle/1"
SIGNATURE_ALGORITHM = "HMAC-SHA256"
#: The fields of the root its signature covers (RFC 8785 JSON of these, keyed by name).
SIGNED_ROOT_FIELDS = ("project", "revision", "tree_size", "root", "time")


# --- the tree ---------------------------------------------------------------------------------


def tree_levels(hashes: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the RFC 6962 tree over the leaf hashes, leaves first, root last.

    Pairing neighbours and carrying a lone last node up unchanged builds exactly RFC 6962's
    tree (as ``merkle_root_of_leaf_hashes`` does); keeping the levels answers many proofs from
    one pass over the leaves."""
    levels = [list(hashes)]
    while len(levels[-1]) > 1:
        level = levels[-1]
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        levels.append(paired)
    return levels


def audit_path(levels: Sequence[Sequence[bytes]], index: int) -> list[bytes]:
    """The inclusion proof of leaf ``index`` (siblings from the leaf up) from ``tree_levels``.
    A node carried up alone has no sibling at that level, as RFC 6962's recursion has none."""
    if not 0 <= index < len(levels[0]):
        raise IndexError(f"leaf {index} is outside a tree of {len(levels[0])}")
    path = []
    for level in levels[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            path.append(level[sibling])
        index //= 2
    return path


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(index, leaves): the audit path of leaf ``index`` (leaf data)."""
    return audit_path(tree_levels([leaf_hash(data) for data in leaves]), index)


def inclusion_proof_reference(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 6962 §2.1.1's recursive definition, verbatim; cross-checks ``inclusion_proof``."""

    def mth(items: Sequence[bytes]) -> bytes:
        if len(items) == 1:
            return leaf_hash(items[0])
        k = _split(len(items))
        return node_hash(mth(items[:k]), mth(items[k:]))

    def path(m: int, items: Sequence[bytes]) -> list[bytes]:
        if len(items) == 1:
            return []
        k = _split(len(items))
        if m < k:
            return [*path(m, items[:k]), mth(items[k:])]
        return [*path(m - k, items[k:]), mth(items[:k])]

    return path(index, leaves)


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether ``proof`` shows leaf data ``leaf`` at ``index`` in the tree of ``size`` leaves
    whose root is ``root`` (RFC 9162 §2.1.3.2)."""
    if not 0 <= index < size:
        return False
    fn, sn = index, size - 1
    r = leaf_hash(leaf)
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


# --- the bundle -------------------------------------------------------------------------------


def signed_root_body(root: Mapping[str, Any]) -> dict[str, Any]:
    """What a root's signature covers: its project, revision, tree size, root hash and time."""
    return {name: root.get(name) for name in SIGNED_ROOT_FIELDS}


def root_sign(root: Mapping[str, Any], key: str) -> str:
    """HMAC-SHA256 of the root's signed fields, as audit checkpoints are signed."""
    return checkpoint_mac(signed_root_body(root), key)


def record_times(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's validity and recorded time as a bundle item states them: a fact's own; an
    episode is valid from when it occurred, with no end."""
    if record.get("type") == "episode":
        valid_from, valid_until = record.get("occurred_at"), None
    else:
        valid_from, valid_until = record.get("valid_from"), record.get("valid_until")
    return {
        "valid_from": valid_from,
        "valid_until": valid_until,
        "recorded_at": record.get("recorded_at"),
    }


def _hex(value: Any) -> bytes | None:
    if not isinstance(value, str) or len(value) != 64:
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None


def _record_problem(item: Mapping[str, Any]) -> tuple[bytes | None, str | None]:
    """The item's leaf data, or why its text and the fields taken from it do not agree."""
    text = item.get("text")
    if not isinstance(text, str):
        return None, "text is missing"
    data = text.encode("utf-8")
    try:
        record = json.loads(text)
    except ValueError:
        return None, "text is not JSON"
    if not isinstance(record, dict) or canonical_json(record) != data:
        return None, "text is not a record's canonical JSON"
    if hashlib.sha256(data).hexdigest() != item.get("sha256"):
        return None, "sha256 does not match its text"
    if record.get("id") != item.get("id") or record.get("type") != item.get("kind"):
        return None, "id or kind differs from its text"
    for name, value in record_times(record).items():
        if item.get(name) != value:
            return None, f"{name} differs from its text"
    return data, None


def item_problem(item: Mapping[str, Any], root: Mapping[str, Any]) -> str | None:
    """Why a bundle item does not verify against the bundle's root (None when it does)."""
    data, problem = _record_problem(item)
    if data is None:
        return problem
    proof = item.get("proof")
    if not isinstance(proof, Mapping):
        return "proof is missing"
    index, size, path = proof.get("leaf_index"), proof.get("tree_size"), proof.get("audit_path")
    if type(index) is not int or type(size) is not int or not isinstance(path, list):
        return "proof is malformed (leaf_index, tree_size, audit_path)"
    if size != root.get("tree_size"):
        return "proof is for another tree size than the root's"
    hashes = [_hex(h) for h in path]
    expected = _hex(root.get("root"))
    if expected is None or any(h is None for h in hashes):
        return "proof or root holds a hash that is not 64 hex digits"
    if not verify_inclusion(data, index, size, [h for h in hashes if h is not None], expected):
        return "its inclusion proof does not lead to the root"
    return None


def signature_state(root: Mapping[str, Any], key: str | None) -> str:
    """``unsigned``, ``unchecked`` (signed, but no key to check it with), ``valid`` or
    ``invalid``."""
    signature = root.get("signature")
    if not isinstance(signature, Mapping):
        return "unsigned"
    if not key:
        return "unchecked"
    mac = signature.get("hmac")
    if signature.get("algorithm") != SIGNATURE_ALGORITHM or not isinstance(mac, str):
        return "invalid"
    return "valid" if checkpoint_mac_matches(signed_root_body(root), mac, key) else "invalid"


def bundle_shape_problem(bundle: Any) -> str | None:
    """Why ``bundle`` is no citation bundle at all (None when it is one)."""
    if not isinstance(bundle, Mapping):
        return "it is not a JSON object"
    if bundle.get("format") != BUNDLE_FORMAT:
        return f'its format is not "{BUNDLE_FORMAT}"'
    if not isinstance(bundle.get("root"), Mapping):
        return "it has no root"
    if not isinstance(bundle.get("items"), list):
        return "it has no items"
    return None


def item_name(item: Any, position: int) -> str:
    """How a report names an item: its id, else its position."""
    if isinstance(item, Mapping) and isinstance(item.get("id"), str) and item["id"]:
        return str(item["id"])
    return f"#{position}"


def bundle_check(
    bundle: Mapping[str, Any], key: str | None
) -> tuple[list[tuple[str, str | None]], str]:
    """Each item's name and why it fails (None when it verifies), and the root's signature
    state (``signature_state``). Call once ``bundle_shape_problem`` found no fault."""
    root = bundle["root"]
    results: list[tuple[str, str | None]] = []
    for position, item in enumerate(bundle["items"]):
        problem = item_problem(item, root) if isinstance(item, Mapping) else "not a JSON object"
        results.append((item_name(item, position), problem))
    return results, signature_state(root, key)
