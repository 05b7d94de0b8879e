"""The one rule that orders memory items the ranking cannot tell apart.

Whenever two items are equal on what decides their place (BM25 score, utility after activation,
utility density when packing, a line's place in its section), the tie goes to the item whose
valid time is the more recent (an episode's ``occurred_at``, a fact's ``valid_from``), then to
the smaller content digest: the SHA-256 of the fields the user recorded (``content_digest``).
Neither a server-made id, a row id, a storage slot nor the order the records arrived in takes
part, so the same memory gives the same context in any project, however and whenever it was
recorded. Only records identical in all of those (which read the same) fall back to their
document key, so that the order is total. Every sort and top-k selection of the compiler breaks
its ties with ``tie_key``. Pure Python: no Django import.
"""

from __future__ import annotations

import hashlib

from graph_app.domain.memory_doc import MemoryDoc
from memoryproject.domain.canonical import canonical_json

TieKey = tuple[float, str, str]
# The key of a storage slot without a document.
EMPTY_TIE: TieKey = (0.0, "", "")


def content_digest(fields: dict[str, object]) -> str:
    """SHA-256 (hex) of an item's recorded fields as canonical JSON (RFC 8785, instants as ISO
    text): what the user wrote and when it held, never an id the server made."""
    return hashlib.sha256(canonical_json(fields)).hexdigest()


_SIGN = 1 << 63


def digest_prefix(digest: str) -> int:
    """The first 8 bytes of ``digest`` (UTF-8, zero-padded) as a signed 64-bit number ordered as
    the strings are (UTF-8 keeps code point order): two digests whose prefixes differ compare as
    their prefixes do, so sorts compare numbers and make whole keys only where prefixes match."""
    return (
        int.from_bytes(digest.encode("utf-8", "surrogatepass")[:8].ljust(8, b"\0"), "big") - _SIGN
    )


def tie_key(doc: MemoryDoc) -> TieKey:
    """Orders tied items: the most recent valid time first, then the content digest (then,
    for identical records only, the document key)."""
    return tie_of(doc.valid_from, doc.digest, doc.key)


def tie_of(valid_from: float, digest: str, key: str) -> TieKey:
    """``tie_key`` of a document given by its parts (a restored index's, from its columns)."""
    return (-valid_from, digest, key)
