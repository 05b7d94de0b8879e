"""Snapshots of the context compiler's per-project index on disk, so that a new process (a
restarted server, a freshly forked worker) loads the index instead of rebuilding it.

A snapshot holds one project's index as plain columns (``domain/index_columns.py``) with the
head of the project's change log it was built at: the graph revision, the log's size and its
last hash. It is served only when the database still holds that exact history:

- same revision: the log's size and head hash must match;
- newer revision: the log entry at the snapshot's size must carry the snapshot's head hash (the
  graph moved on from that state); the compiler then reads only the rows changed since, from
  the change feed;
- anything else (an older revision, another database, a restored backup, a history rewritten
  by an erasure) and the snapshot is ignored: the index is rebuilt from the rows.

A snapshot is also tied to the code that built it (a fingerprint of the modules that shape the
index) and signed with a key derived from ``SECRET_KEY`` (HMAC-SHA256). The signature is checked
before anything else in the file is read, and what is read is data only (a JSON header and
numeric arrays, ``domain/snapshot_file.py``): a file left by another version, truncated,
corrupted or not written by this deployment is ignored, and even one signed with a leaked key
cannot make the process run code. Files are written owner-only to a temporary name and renamed
into place, so readers see a whole snapshot or none. ``COMPILER_SNAPSHOT_DIR`` empty disables
snapshots.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np
from django.conf import settings

from graph_app.domain.index_columns import index_columns, index_restore
from graph_app.domain.index_items import ITEM_COLUMNS
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.snapshot_file import offset_in, snapshot_file_read, snapshot_file_write
from graph_app.snapshot_writer import writer_lock, writer_lock_path
from memoryproject.domain.signed_files import derived_key
from memoryproject.filemodes import PRIVATE_DIR

log = logging.getLogger(__name__)

# 4: each document carries its content digest (the tie-break of graph_app.domain.tiebreak),
# each fact item its nominal tokens. 5: strings end at byte offsets, postings runs ascending
# (read in place). 6: each episode item its preview's token counts.
FORMAT = 6
#: The modules whose code decides what the index holds: a snapshot built by other code is stale.
INDEX_MODULES = (
    "graph_app.index_cache",
    "graph_app.index_documents",
    "graph_app.domain.memory_doc",
    "graph_app.domain.memory_store",
    "graph_app.domain.memory_index",
    "graph_app.domain.bm25",
    "graph_app.domain.tokenize",
    "graph_app.domain.activation",
    "graph_app.domain.tiebreak",
    "graph_app.domain.render",
    "graph_app.domain.profiles",
    "graph_app.domain.index_columns",
    "graph_app.domain.index_items",
    "graph_app.domain.stored_columns",
    "graph_app.domain.postings",
    "graph_app.domain.snapshot_file",
    "graph_app.snapshot",
    "memoryproject.domain.screening",
    "memoryproject.domain.screening_normalize",
    "memoryproject.domain.screening_instructions",
    "memoryproject.domain.screening_languages",
    "memoryproject.domain.screening_needles",
    "memoryproject.domain.screening_providers",
    "memoryproject.domain.screening_secrets",
    "memoryproject.domain.spotlight",
    "memoryproject.tokens",
)


@dataclass(frozen=True)
class GraphHead:
    """Where a project's graph stands: its revision and its change log's size and last hash."""

    revision: int
    changes: int
    head_hash: str


@dataclass(frozen=True)
class Snapshot:
    head: GraphHead
    index: MemoryIndex
    # the latest recording time of a document the index has seen (POSIX seconds)
    max_recorded: float
    # the mapped file the index reads its columns from
    source: MappedSnapshot


def snapshot_dir() -> Path | None:
    directory = str(getattr(settings, "COMPILER_SNAPSHOT_DIR", "") or "")
    return Path(directory) if directory else None


def snapshot_path(project_pk: int) -> Path | None:
    directory = snapshot_dir()
    return None if directory is None else directory / f"project-{int(project_pk)}.index"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over the source of the modules that shape the index: found without importing
    them, so that it is the same whichever of them a process has imported by then."""
    digest = hashlib.sha256()
    for name in INDEX_MODULES:
        spec = find_spec(name)
        path = spec.origin if spec is not None else None
        digest.update(name.encode())
        if path and Path(path).is_file():
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def snapshot_key() -> bytes:
    """The signing key, derived from ``SECRET_KEY`` for this one use."""
    return derived_key(settings.SECRET_KEY, "memoryproject compiler snapshot")


def snapshot_write(
    project_pk: int, head: GraphHead, index: MemoryIndex, max_recorded: float
) -> bool:
    """Writes the snapshot of one project's index atomically; answers whether it was written
    (an unwritable directory or an index that does not store is logged, never raised: the
    compile that triggered it is served)."""
    path = snapshot_path(project_pk)
    if path is None:
        return False
    try:
        meta, arrays = index_columns(index, ITEM_COLUMNS)
        arrays["max_recorded"] = np.array([max_recorded], dtype=np.float64)
        header = {
            "format": FORMAT,
            "code": code_fingerprint(),
            "project": int(project_pk),
            "head": [head.revision, head.changes, head.head_hash],
            "index": meta,
        }
        # Owner only, whatever the process's umask: the index holds the memory's text.
        path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(  # created 0600
            dir=path.parent, prefix=f".{path.name}.{threading.get_ident()}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "wb") as out:
                snapshot_file_write(out, header, arrays, key=snapshot_key())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except Exception as exc:  # an unwritable directory, a value the format cannot hold
        log.warning("compiler index snapshot of project %s not written: %s", project_pk, exc)
        return False
    return True


def _file_state(fd: int) -> tuple[int, ...]:
    """What changes when a file's bytes do: its inode, size and modification and status change
    times (the status change time cannot be set back by a writer)."""
    return _state_of(os.fstat(fd))


def _state_of(state: os.stat_result) -> tuple[int, ...]:
    return (state.st_dev, state.st_ino, state.st_size, state.st_mtime_ns, state.st_ctime_ns)


class MappedSnapshot:
    """The open snapshot file a restored index reads its columns from, for as long as the index
    lives. Snapshots are replaced by renaming a new file into place, never written in place, so
    the mapped file stays as it was verified; ``unchanged`` tells whether it still is (someone
    writing it in place would change its state), which each refresh checks before reading."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._state = _file_state(fd)

    def unchanged(self) -> bool:
        try:
            now = os.fstat(self._fd)
        except OSError:
            return False
        state = _state_of(now)
        if state == self._state:
            return True
        # Replaced by a newer snapshot renamed into place: the old file, unlinked, changed its
        # status time and nothing else (and no one can open it any more to write it).
        if now.st_nlink == 0 and state[:4] == self._state[:4]:
            self._state = state
            return True
        return False

    def region(self, offset: int, size: int) -> FileRegion:
        """``size`` bytes of the file from ``offset``, read by position."""
        return FileRegion(self, offset, size)

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # os.close bound at definition: an index still alive at interpreter exit is collected
        # after the module's globals are cleared.
        _close(self._fd)


class FileRegion:
    """A region of a snapshot file read by position (``os.pread``), not through the map: the
    string table's text (43 % of a snapshot at 100k facts), of which a compile reads a few
    hundred strings (about a hundred reads: ``StoredStrings.many`` reads near ones together). A map counts in a process's resident memory every page it faults in, and where
    the page cache holds the file in large folios (ext4 on recent kernels) one string's fault
    maps up to 2 MiB around it: read through the map, the whole text was resident after one
    compile. Read by position it stays in the page cache, shared by every process, and out of
    each one's resident set. Holds its file open for as long as it lives."""

    def __init__(self, source: MappedSnapshot, offset: int, size: int) -> None:
        self._source = source
        self._offset = offset
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, at: slice) -> bytes:
        start, stop, _ = at.indices(self._size)
        if stop <= start:
            return b""
        return self._source.pread(stop - start, self._offset + start)


def snapshot_read(project_pk: int) -> Snapshot | None:
    """The stored snapshot of one project's index when it is whole, signed by this deployment
    and built by this code; None otherwise (the caller rebuilds).

    The file is mapped, read-only and private, not read: the signature check reads each page
    once, then the pages are let go, and the index reads its numeric columns in place from the
    map (``domain/stored_columns.py``), each page faulted in again when a request reaches it, and
    its strings by position (``FileRegion``). Worker processes mapping the same file share its
    pages. A file whose state changed between the map and the end of the restore is ignored;
    later, ``Snapshot.source.unchanged`` says whether it still holds the bytes verified."""
    path = snapshot_path(project_pk)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("compiler index snapshot %s unreadable: %s", path.name, exc)
        return None
    source = MappedSnapshot(fd)
    try:
        # Private and read-only: this process can neither write the file nor its own copy.
        mapped = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    except (OSError, ValueError) as exc:  # not a regular file, an empty one
        log.warning("compiler index snapshot %s unreadable: %s", path.name, exc)
        return None
    snapshot = _snapshot_restore(mapped, path, project_pk, source)
    if snapshot is not None and not source.unchanged():
        log.warning("compiler index snapshot %s ignored: changed while read", path.name)
        return None
    return snapshot


def _snapshot_restore(
    mapped: mmap.mmap, path: Path, project_pk: int, source: MappedSnapshot
) -> Snapshot | None:
    try:
        header, arrays = snapshot_file_read(mapped, key=snapshot_key())
    except Exception as exc:  # SnapshotRefused, or anything a forged file could still cause
        log.warning("compiler index snapshot %s ignored: %s", path.name, exc)
        return None
    if (
        header.get("format") != FORMAT
        or header.get("code") != code_fingerprint()
        or header.get("project") != project_pk
    ):
        log.info("compiler index snapshot %s ignored: built by other code", path.name)
        return None
    try:
        revision, changes, head_hash = header["head"]
        head = GraphHead(revision=int(revision), changes=int(changes), head_hash=str(head_hash))
        (max_recorded,) = arrays["max_recorded"].tolist()
        text = arrays["strings.text"]
        region = source.region(offset_in(mapped, text), text.nbytes)
        index = index_restore(header["index"], arrays, ITEM_COLUMNS, text=region)
    except Exception as exc:  # a signed file that does not load: ignore it, never fail a compile
        log.warning("compiler index snapshot %s ignored: %s", path.name, exc)
        return None
    # Every page was read by the signature check and the column checks: they go back to the page
    # cache, each faulted in again when a request reaches it.
    mapped.madvise(mmap.MADV_DONTNEED)
    # Requests read columns here and there (the strings by position, not through the map): no
    # read-ahead around them.
    mapped.madvise(mmap.MADV_RANDOM)
    return Snapshot(head=head, index=index, max_recorded=float(max_recorded), source=source)


def snapshot_forget(project_pk: int) -> None:
    """Deletes one project's snapshot (e.g. once the project is deleted or a record erased),
    once a writer writing it meanwhile is done (``graph_app.snapshot_writer``)."""
    path = snapshot_path(project_pk)
    if path is None:
        return
    if not writer_lock_path(path).exists():
        path.unlink(missing_ok=True)  # no writer ever ran here: no lock file is left behind
        return
    with writer_lock(path, wait=True):
        path.unlink(missing_ok=True)
