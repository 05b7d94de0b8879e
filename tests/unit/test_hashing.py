"""Canonical JSON, SHA-256 and RFC 6962 Merkle roots, checked against published vectors."""

import hashlib
import inspect
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph_app.domain.records import (
    episode_canonical,
    fact_as_known_at,
    fact_canonical,
    fact_leaf,
    sha256_of,
)
from memoryproject.domain.canonical import canonical_json
from memoryproject.domain.hashing import (
    leaf_hash,
    merkle_root,
    merkle_root_reference,
    node_hash,
    record_sha256,
    sha256_hex,
)
from memoryproject.domain.instants import UtcText, instant_of, iso_utc, stored_instant, utc_text

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


# --- golden vectors --------------------------------------------------------------------------
# Fixed records with their canonical bytes, SHA-256 and Merkle roots written out. The literals
# were computed once without this package: hashlib over rfc8785.dumps of the forms below, and
# the RFC 6962 tree hash spelled out in ``_rfc6962_root``. A change to the canonical form (a
# field, its name, the time format) or to the tree changes every stored hash: these fail then.

UTC_PLUS_2 = timezone(timedelta(hours=2))
FACT_ARGS = dict(
    id="fact_0123456789abcdef",
    project="acme",
    subject="order_service",
    predicate="stores_data_in",
    object_value="postgres_16",
    object_entity=None,
    singular=True,
    confidence=0.85,
    valid_from=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC_PLUS_2),
    valid_until=datetime(2025, 3, 1, 0, 0, 0, 250000, tzinfo=UTC),
    recorded_at=datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    closed_at=datetime(2025, 3, 1, 12, 0, tzinfo=UTC),
    superseded_by="fact_fedcba9876543210",
    source_episode="ep_00000000000000aa",
)
FACT_BYTES = (
    b'{"closed_at":"2025-03-01T12:00:00.000000Z","confidence":0.85,'
    b'"id":"fact_0123456789abcdef","object_entity":null,"object_value":"postgres_16",'
    b'"predicate":"stores_data_in","project":"acme","recorded_at":"2025-01-02T03:04:05.000006Z",'
    b'"singular":true,"source_episode":"ep_00000000000000aa","subject":"order_service",'
    b'"superseded_by":"fact_fedcba9876543210","type":"fact",'
    b'"valid_from":"2025-01-02T01:04:05.000000Z","valid_until":"2025-03-01T00:00:00.250000Z"}'
)
FACT_SHA256 = "18bf10c2240f6982dc1b8bc23229e205db6e148cfc3088d9c68430b2a34726db"
# The same fact as known before its closure: still open.
FACT_KNOWN_OPEN_SHA256 = "47d8fea8d1227f2b397570834561304131046dc58d1c97627571f6ead738bf8c"

EPISODE_ARGS = dict(
    id="ep_00000000000000aa",
    project="acme",
    category="adr",
    title="ADR: order_service moves to postgres_16",
    content='Décidé: "postgres_16" for order_service 🚀\nline two\ttab',
    files_touched=("src/order/order_service.py",),
    entities_mentioned=("order_service", "postgres_16"),
    metadata={"stream": "conv/session_1", "position": 3, "weight": 1.0, "ratio": 0.1},
    occurred_at=datetime(2025, 1, 2, 0, 30, tzinfo=UTC_PLUS_2),
    recorded_at=datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    external_id="D1:3",
)
EPISODE_BYTES = (
    r'{"category":"adr","content":"Décidé: \"postgres_16\" for order_service 🚀\nline two\ttab",'
    r'"entities_mentioned":["order_service","postgres_16"],"external_id":"D1:3",'
    r'"files_touched":["src/order/order_service.py"],"id":"ep_00000000000000aa",'
    r'"metadata":{"position":3,"ratio":0.1,"stream":"conv/session_1","weight":1},'
    r'"occurred_at":"2025-01-01T22:30:00.000000Z","project":"acme",'
    r'"recorded_at":"2025-01-02T03:04:05.000006Z",'
    r'"title":"ADR: order_service moves to postgres_16","type":"episode"}'
).encode()
EPISODE_SHA256 = "b41b5c385c4a269b870e7c8a040093390616be1d853755eafcc609252a7bd484"

EMPTY_ROOT = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ROOT_FACT = "155deceaad68bd0cef3b69801a38ab74ff6af60c8f21d28a0f51aea2dfeadc0a"
ROOT_FACT_EPISODE = "a9596e84d601b97b24f4089203a35eaa59c545e354c47f932631d8752b5eb392"
ROOT_FACT_EPISODE_KNOWN = "4b496095098cf17a01ccf6a9155dc4b8074e9cc03b0d46a30eafb285006fc27d"
ROOT_ABCDE = "fe14a5426fbd70c0fa73f52342afed0da0bd23c4838662ccf6b88a3070ead97b"


def _rfc6962_root(leaves):
    """RFC 6962 section 2.1, written out: MTH({}) = SHA-256(), a leaf hashes 0x00 || d, a node
    0x01 || left || right, split at the largest power of two smaller than n."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    left, right = _rfc6962_root(leaves[:k]), _rfc6962_root(leaves[k:])
    return hashlib.sha256(b"\x01" + left + right).digest()


def _known_open_bytes():
    return canonical_json(
        fact_as_known_at(
            fact_canonical(**FACT_ARGS),
            closed_at=FACT_ARGS["closed_at"],
            known_at=datetime(2025, 2, 1, tzinfo=UTC),
        )
    )


def test_golden_vectors_are_what_an_independent_computation_gives():
    import rfc8785

    fact_form = json.loads(FACT_BYTES)
    assert rfc8785.dumps(fact_form) == FACT_BYTES
    assert hashlib.sha256(FACT_BYTES).hexdigest() == FACT_SHA256
    assert rfc8785.dumps(json.loads(EPISODE_BYTES)) == EPISODE_BYTES
    assert hashlib.sha256(EPISODE_BYTES).hexdigest() == EPISODE_SHA256
    known = rfc8785.dumps(
        {**fact_form, "valid_until": None, "closed_at": None, "superseded_by": None}
    )
    assert hashlib.sha256(known).hexdigest() == FACT_KNOWN_OPEN_SHA256
    assert _rfc6962_root([]).hex() == EMPTY_ROOT == hashlib.sha256(b"").hexdigest()
    assert _rfc6962_root([FACT_BYTES]).hex() == ROOT_FACT
    assert _rfc6962_root([FACT_BYTES, EPISODE_BYTES]).hex() == ROOT_FACT_EPISODE
    assert _rfc6962_root([FACT_BYTES, EPISODE_BYTES, known]).hex() == ROOT_FACT_EPISODE_KNOWN
    assert _rfc6962_root([b"a", b"b", b"c", b"d", b"e"]).hex() == ROOT_ABCDE


def test_fact_canonical_form_matches_its_golden_bytes_and_hash():
    form = fact_canonical(**FACT_ARGS)
    assert canonical_json(form) == FACT_BYTES
    assert record_sha256(form) == FACT_SHA256
    assert sha256_of(form) == FACT_SHA256
    assert sha256_hex(_known_open_bytes()) == FACT_KNOWN_OPEN_SHA256


def test_episode_canonical_form_matches_its_golden_bytes_and_hash():
    form = episode_canonical(**EPISODE_ARGS)
    assert canonical_json(form) == EPISODE_BYTES
    assert record_sha256(form) == EPISODE_SHA256
    assert sha256_of(form) == EPISODE_SHA256


def test_merkle_roots_match_golden_vectors():
    assert merkle_root([]) == EMPTY_ROOT
    assert merkle_root([FACT_BYTES]) == ROOT_FACT
    assert merkle_root([FACT_BYTES, EPISODE_BYTES]) == ROOT_FACT_EPISODE
    assert merkle_root([FACT_BYTES, EPISODE_BYTES, _known_open_bytes()]) == ROOT_FACT_EPISODE_KNOWN
    assert merkle_root([b"a", b"b", b"c", b"d", b"e"]) == ROOT_ABCDE
    assert merkle_root_reference([b"a", b"b", b"c", b"d", b"e"]) == ROOT_ABCDE


# --- the verification fast paths: a raw read hashes exactly as the general form ---------------

stored_times = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)
)


@given(stored_times)
def test_an_instant_stored_as_text_reads_as_its_canonical_form_without_a_parse(naive):
    # Django keeps an aware datetime on SQLite as str() of its naive UTC value.
    stored = str(naive)
    text = utc_text(stored)
    assert isinstance(text, UtcText)
    assert text == iso_utc(naive.replace(tzinfo=UTC)) == iso_utc(stored_instant(stored))
    assert iso_utc(text) is text


def test_an_instant_in_another_form_is_parsed_and_what_no_calendar_has_never_matches():
    assert utc_text("2025-03-01T10:00:00+02:00") == "2025-03-01T08:00:00.000000Z"
    assert utc_text(datetime(2025, 3, 1, 8, tzinfo=UTC)) == "2025-03-01T08:00:00.000000Z"
    assert utc_text("not a time") is None and utc_text(None) is None
    # The digits stay as stored: whatever a 30th of February hashes to, no stored hash of a
    # real instant matches it.
    assert utc_text("2025-02-30 10:00:00") == "2025-02-30T10:00:00.000000Z"
    assert instant_of(utc_text("2025-03-01 08:00:00.000001")) == datetime(
        2025, 3, 1, 8, 0, 0, 1, tzinfo=UTC
    )


maybe_text = st.none() | st.text(max_size=12)
aware = stored_times.map(lambda t: t.replace(tzinfo=UTC))


@given(
    id=st.text(max_size=12),
    subject=st.text(max_size=12),
    predicate=st.text(max_size=12),
    object_value=st.text(max_size=30),
    object_entity=maybe_text,
    singular=st.booleans() | st.integers(min_value=0, max_value=1),
    confidence=st.floats(min_value=0.0, max_value=1.0) | st.integers(0, 1),
    valid_from=aware,
    valid_until=st.none() | aware,
    recorded_at=aware,
    closed_at=st.none() | aware,
    superseded_by=maybe_text,
    source_episode=maybe_text,
    as_text=st.booleans(),
)
def test_a_facts_leaf_is_the_canonical_json_of_its_form(as_text, **fields):
    times = ("valid_from", "valid_until", "recorded_at", "closed_at")
    expected = canonical_json(fact_canonical(project="proj", **fields))
    if as_text:  # as verification reads them: instants already in their canonical text
        fields = {k: utc_text(v) if k in times else v for k, v in fields.items()}
    positional = list(inspect.signature(fact_leaf).parameters)[1:]  # after the project
    assert fact_leaf("proj", *(fields[name] for name in positional)) == expected


def test_a_fact_with_a_lone_surrogate_takes_the_general_path():
    import rfc8785

    args = ["p", "f1", "\ud800", "is", "x", None, True, 1.0, utc_text("2025-01-01 00:00:00")]
    with pytest.raises(rfc8785.CanonicalizationError):
        fact_leaf(*args, None, utc_text("2025-01-01 00:00:00"), None, None, None)
