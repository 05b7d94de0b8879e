"""Snapshots of the context compiler's per-project index on disk, so that a new process (a
restarted server, a freshly forked worker) loads the index instead of rebuilding it.

A snapshot is the pickled index state of one project with the head of the project's change
log it was built at: the graph revision, the log's size and its last hash. It is served only
when the database still holds that exact history:

- same revision: the log's size and head hash must match;
- newer revision: the log entry at the snapshot's size must carry the snapshot's head hash (the
  graph moved on from that state); the compiler then reads only the rows changed since, from
  the change feed;
- anything else (an older revision, another database, a restored backup, a history rewritten
  by an erasure) and the snapshot is ignored: the index is rebuilt from the rows.

A snapshot is also tied to the code that built it (a fingerprint of the modules that shape the
index) and signed with a key derived from ``SECRET_KEY`` (BLAKE2b): a file left by another
version, truncated, corrupted or not written by this deployment is ignored, never loaded.
Files are written to a temporary name and renamed into place, so readers see a whole snapshot
or none. ``COMPILER_SNAPSHOT_DIR`` empty disables snapshots.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from memoryproject.collector import collector_paused

log = logging.getLogger(__name__)

MAGIC = b"memoryproject-index-snapshot/1\n"
DIGEST_BYTES = 32
#: The modules whose code decides what the index holds: a snapshot built by other code is stale.
INDEX_MODULES = (
    "graph_app.compiler",
    "graph_app.domain.retrieval",
    "graph_app.domain.bm25",
    "graph_app.domain.tokenize",
    "graph_app.domain.activation",
    "graph_app.domain.render",
    "graph_app.domain.profiles",
    "graph_app.snapshot",
    "memoryproject.domain.screening",
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
    state: Any


def snapshot_dir() -> Path | None:
    directory = str(getattr(settings, "COMPILER_SNAPSHOT_DIR", "") or "")
    return Path(directory) if directory else None


def snapshot_path(project_pk: int) -> Path | None:
    directory = snapshot_dir()
    return None if directory is None else directory / f"project-{int(project_pk)}.index"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over the source of the modules that shape the index."""
    digest = hashlib.sha256()
    for name in INDEX_MODULES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        digest.update(name.encode())
        if path:
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def _mac(payload: bytes | memoryview) -> bytes:
    key = hashlib.sha256(f"compiler-snapshot:{settings.SECRET_KEY}".encode()).digest()
    return hashlib.blake2b(payload, key=key, digest_size=DIGEST_BYTES).digest()


def snapshot_write(project_pk: int, head: GraphHead, state: Any) -> bool:
    """Writes the snapshot of one project's index atomically; answers whether it was written
    (an unwritable directory is logged, never raised: the compile that triggered it is served)."""
    path = snapshot_path(project_pk)
    if path is None:
        return False
    try:
        payload = pickle.dumps(
            (code_fingerprint(), int(project_pk), head, state), protocol=pickle.HIGHEST_PROTOCOL
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.{threading.get_ident()}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC)
                out.write(_mac(payload))
                out.write(payload)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, pickle.PicklingError, RecursionError) as exc:
        log.warning("compiler index snapshot of project %s not written: %s", project_pk, exc)
        return False
    return True


def snapshot_read(project_pk: int) -> Snapshot | None:
    """The stored snapshot of one project's index when it is whole, signed by this deployment
    and built by this code; None otherwise (the caller rebuilds)."""
    path = snapshot_path(project_pk)
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("compiler index snapshot %s unreadable: %s", path.name, exc)
        return None
    start = len(MAGIC) + DIGEST_BYTES
    if not data.startswith(MAGIC) or len(data) <= start:
        log.warning("compiler index snapshot %s ignored: not a snapshot", path.name)
        return None
    payload = memoryview(data)[start:]
    if not hmac.compare_digest(data[len(MAGIC) : start], _mac(payload)):
        log.warning("compiler index snapshot %s ignored: signature mismatch", path.name)
        return None
    try:
        with collector_paused():  # millions of small objects, scanned over and over otherwise
            fingerprint, pk, head, state = pickle.loads(payload)
    except Exception as exc:  # a signed file that does not load: ignore it, never fail a compile
        log.warning("compiler index snapshot %s ignored: %s", path.name, exc)
        return None
    if fingerprint != code_fingerprint() or pk != project_pk or not isinstance(head, GraphHead):
        log.info("compiler index snapshot %s ignored: built by other code", path.name)
        return None
    return Snapshot(head=head, state=state)


def snapshot_forget(project_pk: int) -> None:
    """Deletes one project's snapshot (e.g. once the project is deleted)."""
    path = snapshot_path(project_pk)
    if path is not None:
        path.unlink(missing_ok=True)
