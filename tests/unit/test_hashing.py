"""Canonical JSON, SHA-256 and RFC 6962 Merkle roots, checked against published vectors."""

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph_app.domain.hashing import (
    canonical_json,
    leaf_hash,
    merkle_root,
    merkle_root_reference,
    node_hash,
    record_sha256,
)

# The Certificate Transparency reference implementation's test leaves and roots (sizes 1..8).
CT_LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    bytes(range(0x50, 0x58)),
    bytes(range(0x60, 0x70)),
]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def test_merkle_roots_match_certificate_transparency_vectors():
    for size, expected in enumerate(CT_ROOTS, start=1):
        assert merkle_root(CT_LEAVES[:size]) == expected


def test_empty_tree_is_hash_of_empty_string():
    assert merkle_root([]) == hashlib.sha256(b"").hexdigest()


def test_leaf_and_node_hashes_are_domain_separated():
    assert leaf_hash(b"x") == hashlib.sha256(b"\x00x").digest()
    assert node_hash(b"a", b"b") == hashlib.sha256(b"\x01ab").digest()
    # A two-leaf tree is not the hash of a leaf whose data is the two leaf hashes.
    left, right = leaf_hash(b"a"), leaf_hash(b"b")
    assert merkle_root([b"a", b"b"]) != leaf_hash(left + right).hex()


def test_three_leaves_split_at_largest_power_of_two():
    a, b, c = (leaf_hash(x) for x in (b"a", b"b", b"c"))
    assert merkle_root([b"a", b"b", b"c"]) == node_hash(node_hash(a, b), c).hex()


@given(st.lists(st.binary(max_size=8), max_size=70))
def test_fast_root_equals_recursive_definition(leaves):
    assert merkle_root(leaves) == merkle_root_reference(leaves)


def test_order_matters_and_any_change_changes_the_root():
    assert merkle_root([b"a", b"b"]) != merkle_root([b"b", b"a"])
    assert merkle_root([b"a", b"b", b"c"]) != merkle_root([b"a", b"b", b"d"])


def test_canonical_json_is_rfc8785():
    # Keys sorted, no whitespace, integral floats without fraction, unicode kept as is.
    assert (
        canonical_json({"b": 1.0, "a": [True, None, "é"]}) == '{"a":[true,null,"é"],"b":1}'.encode()
    )
    assert record_sha256({"x": 1, "y": 2}) == record_sha256({"y": 2, "x": 1})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_fast_canonical_json_is_byte_identical_to_rfc8785(value):
    import rfc8785

    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        with pytest.raises(rfc8785.CanonicalizationError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


def test_canonical_json_edge_cases_match_rfc8785():
    import rfc8785

    for value in [
        {"\U0001f600": 1, "\ufb01": 2, "a": 3},  # UTF-16 ordering differs from code points
        {"k": 'line\nbreak\t"quoted" \\ \x00 \x1f \u2028 é'},
        {"n": [0.1, 1e21, 1e-7, -0.0, 2**53 - 1, 123456789.125]},
        ("tuple", True, None),
    ]:
        assert canonical_json(value) == rfc8785.dumps(value)
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json({"x": "\ud800"})
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json({"x": 2**60})
