"""RFC 6962 inclusion proofs and the offline check of a citation bundle (no database)."""

from __future__ import annotations

import copy
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph_app.domain.proofs import (
    BUNDLE_FORMAT,
    bundle_check,
    bundle_shape_problem,
    inclusion_proof,
    inclusion_proof_reference,
    root_sign,
    verify_inclusion,
)
from memoryproject.domain.canonical import canonical_json
from memoryproject.domain.hashing import merkle_root
from tests.unit.test_hashing import CT_LEAVES, CT_ROOTS

KEY = "k" * 40

# Inclusion proofs of the Certificate Transparency reference test tree (transparency-dev/merkle
# and certificate-transparency's merkle tree tests): (leaf index, tree size, audit path).
CT_PROOFS = [
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]


@pytest.mark.parametrize(("index", "size", "path"), CT_PROOFS)
def test_proofs_match_certificate_transparency_vectors(index, size, path):
    leaves = CT_LEAVES[:size]
    proof = inclusion_proof(leaves, index)
    assert [h.hex() for h in proof] == path
    root = bytes.fromhex(CT_ROOTS[size - 1])
    assert verify_inclusion(leaves[index], index, size, proof, root)


@given(st.lists(st.binary(max_size=12), min_size=1, max_size=17))
def test_every_leaf_of_every_tree_up_to_17_is_proven(leaves):
    size = len(leaves)
    root = bytes.fromhex(merkle_root(leaves))
    for index in range(size):
        proof = inclusion_proof(leaves, index)
        assert proof == inclusion_proof_reference(leaves, index)
        assert verify_inclusion(leaves[index], index, size, proof, root)


@pytest.mark.parametrize("size", range(1, 18))
def test_a_wrong_leaf_index_size_or_path_fails(size):
    leaves = [bytes([n]) * (n + 1) for n in range(size)]
    root = bytes.fromhex(merkle_root(leaves))
    for index in range(size):
        proof = inclusion_proof(leaves, index)
        assert not verify_inclusion(leaves[index] + b"!", index, size, proof, root)
        assert not verify_inclusion(leaves[index], index, size, [*proof, root], root)
        assert not verify_inclusion(leaves[index], size, size, proof, root)
        if size > 1:
            other = (index + 1) % size
            assert not verify_inclusion(leaves[index], other, size, proof, root)
            flipped = [bytes([proof[0][0] ^ 1]) + proof[0][1:], *proof[1:]]
            assert not verify_inclusion(leaves[index], index, size, flipped, root)
            assert not verify_inclusion(leaves[index], index, size, proof[:-1], root)


# --- bundles ----------------------------------------------------------------------------------


def _bundle(key: str | None = None) -> dict:
    """A bundle over a graph of three facts and two episodes citing one of each."""
    records = [
        {"type": "fact", "id": f"fact_{n}", "valid_from": f"2026-0{n}-01T00:00:00.000000Z",
         "valid_until": None, "recorded_at": "2026-05-01T00:00:00.000000Z", "n": n}
        for n in (1, 2, 3)
    ] + [
        {"type": "episode", "id": f"ep_{n}", "occurred_at": "2026-04-0{n}T00:00:00.000000Z",
         "recorded_at": "2026-05-02T00:00:00.000000Z", "content": f"episode {n}"}
        for n in (1, 2)
    ]  # fmt: skip
    leaves = [canonical_json(r) for r in records]
    root = {
        "project": "default",
        "revision": 5,
        "tree_size": len(leaves),
        "root": merkle_root(leaves),
        "time": "2026-05-03T00:00:00Z",
        "signed": False,
        "signature": None,
    }
    if key:
        root["signature"] = {"algorithm": "HMAC-SHA256", "hmac": root_sign(root, key)}
        root["signed"] = True
    items = []
    for index in (1, 4):
        record = records[index]
        is_fact = record["type"] == "fact"
        items.append(
            {
                "id": record["id"],
                "kind": record["type"],
                "citation": f"[{record['id']}]",
                "text": leaves[index].decode(),
                "valid_from": record["valid_from"] if is_fact else record["occurred_at"],
                "valid_until": None,
                "recorded_at": record["recorded_at"],
                "sha256": hashlib.sha256(leaves[index]).hexdigest(),
                "proof": {
                    "leaf_index": index,
                    "tree_size": len(leaves),
                    "audit_path": [h.hex() for h in inclusion_proof(leaves, index)],
                },
            }
        )
    return {
        "format": BUNDLE_FORMAT,
        "project": "default",
        "query": "q",
        "root": root,
        "items": items,
    }


def _failures(bundle: dict, key: str | None = None) -> dict[str, str]:
    results, _ = bundle_check(bundle, key)
    return {name: problem for name, problem in results if problem is not None}


def test_an_intact_bundle_verifies_every_item():
    bundle = _bundle()
    assert bundle_shape_problem(bundle) is None
    results, signature = bundle_check(bundle, None)
    assert results == [("fact_2", None), ("ep_2", None)]
    assert signature == "unsigned"


def _tamper_text(item):
    item["text"] = item["text"].replace("2026-02-01", "2026-02-02")


def _tamper_text_and_hash(item):
    # A consistent forgery: the record says something else, hashed anew.
    item["text"] = item["text"].replace('"n":2', '"n":7')
    item["sha256"] = hashlib.sha256(item["text"].encode()).hexdigest()


def _tamper_sha(item):
    item["sha256"] = "0" * 64


def _tamper_index(item):
    item["proof"]["leaf_index"] = 0


def _tamper_path(item):
    path = item["proof"]["audit_path"]
    path[1] = ("f" if path[1][0] != "f" else "e") + path[1][1:]


def _tamper_valid_until(item):
    item["valid_until"] = "2026-03-01T00:00:00.000000Z"


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (_tamper_text, "sha256 does not match its text"),
        (_tamper_text_and_hash, "its inclusion proof does not lead to the root"),
        (_tamper_sha, "sha256 does not match its text"),
        (_tamper_index, "its inclusion proof does not lead to the root"),
        (_tamper_path, "its inclusion proof does not lead to the root"),
        (_tamper_valid_until, "valid_until differs from its text"),
    ],
)
def test_a_tampered_item_fails_naming_its_id(tamper, reason):
    bundle = _bundle()
    tamper(bundle["items"][0])
    assert _failures(bundle) == {"fact_2": reason}


def test_a_changed_root_fails_every_item():
    bundle = _bundle()
    bundle["root"]["root"] = "ab" * 32
    assert set(_failures(bundle)) == {"fact_2", "ep_2"}


def test_a_signed_root_is_checked_with_the_key():
    bundle = _bundle(KEY)
    assert bundle_check(bundle, KEY)[1] == "valid"
    assert bundle_check(bundle, None)[1] == "unchecked"
    assert bundle_check(bundle, "x" * 40)[1] == "invalid"
    altered = copy.deepcopy(bundle)
    altered["root"]["time"] = "2027-01-01T00:00:00Z"
    assert bundle_check(altered, KEY)[1] == "invalid"


@pytest.mark.parametrize(
    ("document", "phrase"),
    [
        ([], "not a JSON object"),
        ({"format": "other"}, "format"),
        ({"format": BUNDLE_FORMAT, "items": []}, "no root"),
        ({"format": BUNDLE_FORMAT, "root": {}}, "no items"),
    ],
)
def test_what_is_no_bundle_is_said(document, phrase):
    assert phrase in (bundle_shape_problem(document) or "")
