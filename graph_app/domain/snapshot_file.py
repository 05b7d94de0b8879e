"""The file format of the compiler's index snapshot: a signed JSON header and plain arrays.

Nothing in a snapshot is ever executed or unpickled. The file is::

    MAGIC | keyed BLAKE3 (32 bytes) | header size (8 bytes, little-endian) | JSON header
          | zero padding to a multiple of 64 | the arrays' bytes, each at a multiple of 64

The signature (keyed BLAKE3, ``memoryproject.domain.signed_files``), which every new server
checks as it loads its index, covers every byte after it and is checked before anything else
is read: a file that was not written with the key is refused unparsed. Even a file signed with
the key (a key that leaked) is read as data only: the header is JSON, each array is
one-dimensional with a dtype from a fixed set of numbers and booleans (never objects), and its
place is checked to lie inside the file. Arrays are views of the bytes in place, aligned: the
reader maps the file (``graph_app.snapshot``) rather than reading it into memory. Pure Python +
numpy: no Django import.
"""

from __future__ import annotations

import hmac
import json
import mmap
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np

from memoryproject.domain.signed_files import MAC_BYTES, mac, mac_hasher

#: /3: signed with keyed BLAKE3 (a /2 file, signed with HMAC-SHA256, is refused and rebuilt).
MAGIC = b"memoryproject-index-snapshot/3\n"
_SIZE_BYTES = 8
ALIGN = 64
#: The only dtypes an array may have (``np.dtype.str``): numbers and booleans, little-endian.
DTYPES = frozenset({"|b1", "|u1", "<i4", "<i8", "<f8"})
_BODY = len(MAGIC) + MAC_BYTES


class SnapshotRefused(ValueError):
    """A file that is not a whole snapshot signed with the key, or does not parse as one."""


def _padding(size: int) -> bytes:
    return b"\0" * (-size % ALIGN)


def snapshot_file_write(
    out: BinaryIO, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray], *, key: bytes
) -> None:
    """Writes ``header`` (JSON values) and ``arrays`` (one-dimensional, of ``DTYPES``) to the
    seekable ``out``, signed with ``key`` (32 bytes)."""
    layout: dict[str, list[Any]] = {}
    chunks: list[np.ndarray] = []
    offset = 0
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        if array.ndim != 1 or array.dtype.str not in DTYPES:
            raise ValueError(f"array {name}: {array.dtype.str} x {array.shape} is not storable")
        layout[name] = [array.dtype.str, len(array), offset]
        chunks.append(array)
        offset += array.nbytes + len(_padding(array.nbytes))
    text = json.dumps({"header": header, "arrays": layout}, allow_nan=False).encode()
    start = _SIZE_BYTES + len(text)
    signing = mac_hasher(key)
    out.write(MAGIC)
    out.write(b"\0" * MAC_BYTES)  # the signature, once every byte it covers is known

    def put(data: bytes | memoryview) -> None:
        signing.update(data)
        out.write(data)

    put(len(text).to_bytes(_SIZE_BYTES, "little"))
    put(text)
    put(_padding(_BODY + start))  # the arrays start at a multiple of ALIGN in the file
    for array in chunks:
        put(array.data.cast("B"))
        put(_padding(array.nbytes))
    out.seek(len(MAGIC))
    out.write(signing.digest())


#: What a snapshot is read from: its bytes, or a read-only map of its file.
Stored = bytes | mmap.mmap


def snapshot_file_read(data: Stored, *, key: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays (read-only views of ``data``) of a snapshot signed with
    ``key``. Raises ``SnapshotRefused`` when the signature does not match (checked first) or
    the signed bytes do not parse. The signature is computed over ``data`` in place: a map of
    the file is read once by the check, without a copy."""
    if len(data) < _BODY + _SIZE_BYTES or data[: len(MAGIC)] != MAGIC:
        raise SnapshotRefused("not a snapshot")
    with memoryview(data) as view, view[_BODY:] as body:
        digest = mac(body, key=key)
    if not hmac.compare_digest(data[len(MAGIC) : _BODY], digest):
        raise SnapshotRefused("signature mismatch")
    size = int.from_bytes(data[_BODY : _BODY + _SIZE_BYTES], "little")
    if size > len(data) - _BODY - _SIZE_BYTES:
        raise SnapshotRefused("header past the end of the file")
    try:
        document = json.loads(data[_BODY + _SIZE_BYTES : _BODY + _SIZE_BYTES + size])
        header, layout = document["header"], document["arrays"]
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise SnapshotRefused(f"header: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(layout, dict):
        raise SnapshotRefused("header: not an object")
    start = _BODY + _SIZE_BYTES + size
    start += -start % ALIGN
    return header, {name: _array(data, start, name, place) for name, place in layout.items()}


def _array(data: Stored, start: int, name: str, place: Any) -> np.ndarray:
    if not (isinstance(place, list) and len(place) == 3 and str(place[0]) in DTYPES):
        raise SnapshotRefused(f"array {name}: not a stored array")
    dtype, count, offset = np.dtype(place[0]), place[1], place[2]
    if not all(type(n) is int and n >= 0 for n in (count, offset)):
        raise SnapshotRefused(f"array {name}: bad size or offset")
    if start + offset + count * dtype.itemsize > len(data):
        raise SnapshotRefused(f"array {name}: past the end of the file")
    return np.frombuffer(data, dtype=dtype, count=count, offset=start + offset)


def offset_in(data: Stored, array: np.ndarray) -> int:
    """Where ``array``, a view ``snapshot_file_read`` made of ``data``, starts in ``data`` (the
    file's byte offset, for reading that array by position instead of through the map)."""
    first = np.frombuffer(data, dtype=np.uint8, count=1).__array_interface__["data"][0]
    offset = int(array.__array_interface__["data"][0]) - int(first)
    if not 0 <= offset <= len(data) - array.nbytes:
        raise ValueError("the array is not a view of these bytes")
    return offset
