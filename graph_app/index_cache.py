"""The compiler's tokenized index, kept per project in process memory.

Each index is keyed by its project's graph revision. A compile reads the revision (one small
query); when it moved, only the facts and episodes stamped with a later revision are fetched
(``graph_app.index_selectors``) and replaced in the index, whose BM25 statistics then score
exactly like a fresh build. A lock per project makes this thread-safe. Once a refresh has read
``COMPILER_SNAPSHOT_MIN_ROWS`` rows since the last one, the index is written to a snapshot on
disk (``graph_app.snapshot``), which the next process loads instead of rebuilding; it then reads
only the rows changed since. ``compiler_warm`` loads or builds every project's index up front:
in a server's main process before it forks, its workers share the indexes copy-on-write.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
from django.conf import settings

from graph_app.domain.index_items import FACT_LINE_FIELDS, IndexItem
from graph_app.domain.memory_doc import INF, MemoryDoc
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.semantic import available as semantic_available
from graph_app.domain.semantic import missing as semantic_missing
from graph_app.domain.semantic import sentence_encoder
from graph_app.graph_head import graph_head, graph_head_continues, graph_head_reached
from graph_app.index_documents import episode_doc, fact_doc
from graph_app.index_selectors import (
    episode_rows_changed_since,
    fact_rows_changed_since,
)
from graph_app.snapshot import (
    GraphHead,
    MappedSnapshot,
    snapshot_forget,
    snapshot_path,
    snapshot_read,
    snapshot_write,
)
from graph_app.snapshot_writer import snapshot_in_background, writer_lock
from memoryproject import sql
from memoryproject.collector import heap_trim
from memoryproject.models import Project
from memoryproject.tokens import tokens_warm

log = logging.getLogger(__name__)


class ProjectIndex:
    """One project's index in this process, the revision it reached and how it got there."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.revision = -1
        self.index = MemoryIndex()
        self.max_recorded = -INF
        # Rows read from the database into this index, and since its last snapshot was written.
        self.rows_read = 0
        self.rows_unsaved = 0
        # The revision of the snapshot this index was loaded from (-1: built from the rows),
        # and of the snapshot on disk as this process last read or wrote it (-1: none).
        self.restored = -1
        self.saved = -1
        # The graph's head when the index last caught up with it (None: not yet).
        self.head: GraphHead | None = None
        # The snapshot file a restored index reads its columns from (None: built from the rows).
        self.source: MappedSnapshot | None = None
        # The database's change stamp (``sql.change_stamp``) taken before ``head`` was read:
        # while it holds, no write happened since and the head need not be read again.
        self.stamp: tuple[object, int, int] | None = None

    def refresh(self, project: Project, *, save: bool = True) -> int:
        """Brings the index up to the project's current revision; answers that revision. A new
        process starts from the project's snapshot when it still describes the graph. With
        ``save``, once ``COMPILER_SNAPSHOT_MIN_ROWS`` rows were read since the last snapshot,
        one is written (``_snapshot_due``)."""
        if self.source is not None and not self.source.unchanged():
            # The snapshot file was written in place since it was verified: its columns are no
            # longer the ones signed. Start over from the rows.
            log.warning("compiler index snapshot of project %s changed: rebuilt", project.slug)
            self._start_over()
        if self.revision < 0:
            self._restore(project)
        stamp = sql.change_stamp()
        if stamp is not None and stamp == self.stamp and self.head is not None:
            return self.revision  # nothing was written since the head was last read
        head = graph_head(project)
        current = head.revision
        if self.head is not None and not graph_head_continues(
            project=project, head=self.head, current=head
        ):
            # The graph went back in time (a restored backup, a rolled-back write), perhaps
            # moving on since to the same revision with other rows: start over.
            self._start_over()
        self.head = head
        if current == self.revision:
            self._embed()
            self.stamp = stamp
            return current
        since = max(self.revision, 0)
        rows = 0
        for row in episode_rows_changed_since(project=project, revision=since):
            self._put(episode_doc(row))
            rows += 1
        for row in fact_rows_changed_since(project=project, revision=since):
            self._put(fact_doc(row))
            rows += 1
        built = since == 0 and rows > 0
        if built:
            # A build from the rows (no index, no usable snapshot): what a warm start avoids.
            # Its postings are then kept as a restored index keeps them (about 0.2 s at 100k),
            # and the heap their dicts held goes back to the system.
            self.index.bm25.compact()
            heap_trim()
            log.info(
                "compiler index of project %s built from %d rows in process %d",
                project.slug,
                rows,
                os.getpid(),
            )
        self.revision = current
        self._embed()
        self.stamp = stamp
        self.rows_read += rows
        self.rows_unsaved += rows
        if save and self.rows_unsaved >= settings.COMPILER_SNAPSHOT_MIN_ROWS:
            self._snapshot_due(project)
        if built and self.source is None:
            # Kept as built: every entity's links and items made now (about 0.1 s at 100k), kept
            # across writes, so that no first ranking that reaches an entity pays for them (an
            # index served from its snapshot instead makes them there, ``_serve_saved``).
            self.index.graph_warm()
            _settle()
        return current

    def _snapshot_due(self, project: Project) -> None:
        """Writes the snapshot: here when the index was built from the rows (its documents are
        at hand), else by a process of its own (``graph_app.snapshot_writer``), which makes the
        documents again from the columns without this process waiting or keeping them."""
        if self.source is None or not settings.COMPILER_SNAPSHOT_BACKGROUND:
            built = self.source is None
            if self.save(project) and built:
                self._serve_saved(project)
            return
        self.rows_unsaved = 0
        snapshot_in_background(project.slug)

    def _serve_saved(self, project: Project) -> None:
        """Serves the index built here from the snapshot just written of it: the same documents
        at the same revision, read in place from the file's columns, as every process started
        since reads them. The built index's memory goes back to the system (at 100k facts the
        process held 417,136 kB of anonymous memory after its first compile, 226,416 kB so), and
        a query asked again is ranked faster (5.1 against 6.3 ms: the built index's tuples lie
        wherever the rows left them). Kept as built when the file on disk is not that snapshot
        any more."""
        snapshot = snapshot_read(project.pk)
        if snapshot is None or snapshot.head != self.head:
            return
        built, self.index, self.source = self.index, snapshot.index, snapshot.source
        if len(built.dense):
            # Sentence vectors are not in the snapshot: those made for the build move to the
            # slots the file gives the same documents, rather than being made again.
            slot_of = self.index.bm25.slots
            self.index.dense = built.dense.moved(
                {old: slot_of[key] for key, old in built.bm25.slots.items() if key in slot_of}
            )
        del built
        # The built index is let go by reference counting; a full collection then empties the
        # interpreter's free lists, whose last tuples and floats would otherwise keep whole
        # arenas of it mapped (about 180 MB at 100k facts).
        gc.collect()
        # As a build kept as built does: every entity's links and items made now (about 0.12 s
        # at 100k, 30 MB), not by the first rankings that reach them.
        self.index.graph_warm()
        _settle()
        heap_trim()
        log.info(
            "compiler index of project %s served from its snapshot (revision %d) in process %d",
            project.slug,
            self.revision,
            os.getpid(),
        )

    def _start_over(self) -> None:
        self.revision, self.index, self.max_recorded = -1, MemoryIndex(), -INF
        self.source, self.restored, self.saved, self.stamp = None, -1, -1, None

    def _restore(self, project: Project) -> None:
        snapshot = snapshot_read(project.pk)
        if snapshot is None or not graph_head_reached(project=project, head=snapshot.head):
            return
        self.index, self.max_recorded = snapshot.index, snapshot.max_recorded
        self.source = snapshot.source
        self.revision = self.restored = self.saved = snapshot.head.revision
        self.head = snapshot.head
        _settle()
        log.info(
            "compiler index of project %s loaded from its snapshot (revision %d) in process %d",
            project.slug,
            self.revision,
            os.getpid(),
        )

    def save(self, project: Project) -> bool:
        """Writes the snapshot of this index; answers whether it was written."""
        head = graph_head(project)
        # Saved only as of a revision the index has reached, with that revision's log head.
        written = (
            head.revision == self.revision
            and head.changes > 0
            and snapshot_write(project.pk, head, self.index, self.max_recorded)
        )
        if written:
            self.rows_unsaved, self.saved = 0, self.revision
        _settle()
        return written

    def _embed(self) -> None:
        """With the semantic backend on, a sentence vector for every document without one
        (new or changed since, or all of them after a snapshot was loaded)."""
        index = self.index
        if len(index.dense) >= len(index.docs) or not semantic_on():
            return
        docs = list(index.docs.values())
        slots = [index.bm25.slot(doc.key) for doc in docs]
        wanted = set(index.dense.missing([s for s in slots if s is not None]))
        chosen = [(s, d) for s, d in zip(slots, docs, strict=True) if s in wanted]
        if chosen:
            vectors = sentence_encoder().encode([semantic_text(d) for _, d in chosen])
            index.dense.put([s for s, _ in chosen], vectors)

    def _put(self, doc: MemoryDoc) -> None:
        self.index.upsert(doc)
        self.max_recorded = max(self.max_recorded, doc.recorded_at)


_semantic_warned = False


def semantic_on() -> bool:
    """Whether the semantic backend is on (``MEMORY_SEMANTIC``) and installed; asked for but
    missing, it is off and a warning says what to install, once."""
    global _semantic_warned
    if not settings.MEMORY_SEMANTIC:
        return False
    if semantic_available():
        return True
    if not _semantic_warned:
        _semantic_warned = True
        log.warning("MEMORY_SEMANTIC is set but the semantic backend needs: %s", semantic_missing())
    return False


def semantic_text(doc: MemoryDoc) -> str:
    """What a document's sentence vector is made of: an episode's line after its citation
    (title, date, files, content), a fact's subject, predicate and value."""
    item = doc.payload
    if not isinstance(item, IndexItem):
        return " ".join(doc.tokens)
    if item.kind == "fact" and item.fact_fields:
        fields = dict(zip(FACT_LINE_FIELDS, item.fact_fields, strict=True))
        return f"{fields['subject']} {fields['predicate']} {fields['object_value']}"
    return item.line[len(item.citation) :].strip()


def query_vector(index: MemoryIndex, text: str) -> np.ndarray | None:
    """The query's sentence vector when the index has documents' vectors to compare it with."""
    if not len(index.dense) or not semantic_on():
        return None
    return sentence_encoder().encode([text])[0]


def _settle() -> None:
    """Moves the objects of a freshly built or loaded index out of the garbage collector's
    generations: they live as long as the process, and a full collection scanning them again
    and again would stall compiles (and, in forked workers, unshare copy-on-write pages)."""
    gc.freeze()


_cache: dict[int, ProjectIndex] = {}
_cache_lock = threading.Lock()


def project_index(project: Project) -> ProjectIndex:
    with _cache_lock:
        entry = _cache.get(project.pk)
        if entry is None:
            entry = _cache[project.pk] = ProjectIndex()
        return entry


def compiler_cache_forget(project_pk: int) -> None:
    """Drops one project's cached index and its snapshot (e.g. once the project is deleted or
    a record erased: erased text must not stay on disk)."""
    with _cache_lock:
        _cache.pop(project_pk, None)
        snapshot_forget(project_pk)


def compiler_warm(*, projects: Iterable[Project] | None = None) -> dict[str, int]:
    """Loads (from its snapshot) or builds the index of every project (or of ``projects``): in
    a server's main process before it forks its workers, which then share the indexes
    copy-on-write instead of each loading its own. Answers each index's revision by slug."""
    tokens_warm()  # the tokenizer loads and runs once, in the process that forks
    warmed: dict[str, int] = {}
    for project in Project.objects.order_by("pk") if projects is None else projects:
        entry = project_index(project)
        with entry.lock:
            warmed[project.slug] = entry.refresh(project)
            entry.index.bm25.prepare()
    _settle()
    log.info("compiler indexes warmed in process %d: %s", os.getpid(), warmed)
    return warmed


def compiler_cache_stats(project_pk: int) -> dict[str, int] | None:
    """How this process holds one project's index: its revision, the rows it read from the
    database, the snapshot revision it was loaded from (-1: none) and whether it reads its
    columns from a snapshot file (1: loaded from one, or built here and served from the one it
    wrote). None: not loaded."""
    with _cache_lock:
        entry = _cache.get(project_pk)
    if entry is None:
        return None
    return {
        "revision": entry.revision,
        "rows_read": entry.rows_read,
        "restored": entry.restored,
        "mapped": int(entry.source is not None),
    }


def compiler_cache_clear() -> None:
    """Forgets every cached index (they are rebuilt on the next compile)."""
    with _cache_lock:
        _cache.clear()


# Refreshes and saves ``snapshot_now`` tries while writes keep landing between the two.
SNAPSHOT_ATTEMPTS = 3


def snapshot_now(project: Project, *, min_rows: int = 0) -> dict[str, Any]:
    """Brings ``project``'s index up to date in this process (from its snapshot, then the rows
    changed since) and writes its snapshot anew when the one on disk is behind, holding the
    writer's lock (``graph_app.snapshot_writer``); a write landing between the refresh and the
    save is caught up with, and the save tried again. With ``min_rows``, a snapshot this
    process restored is written anew only once at least that many rows were read since it.
    Answers what was done: ``status`` written, current (the snapshot already describes the
    graph), recent (fewer than ``min_rows`` rows behind), empty (no graph yet), busy (another
    writer holds the lock), off (no snapshot directory) or failed (logged)."""
    path = snapshot_path(project.pk)
    report: dict[str, Any] = {"project": project.slug, "status": "off"}
    if path is None:
        return report
    with writer_lock(path, wait=False) as had:
        if not had:
            return report | {"status": "busy"}
        entry = project_index(project)
        with entry.lock:
            for _ in range(SNAPSHOT_ATTEMPTS):
                revision = entry.refresh(project, save=False)
                report |= {"revision": revision, "snapshot": entry.restored}
                report["rows"] = entry.rows_read
                if entry.head is None or entry.head.changes == 0:
                    return report | {"status": "empty"}  # no graph yet: nothing to keep
                if entry.saved == revision:
                    return report | {"status": "current"}
                if 0 <= entry.restored == entry.saved and entry.rows_read < min_rows:
                    # Written meanwhile by the writer another process started (each server
                    # counts the rows it reads itself).
                    return report | {"status": "recent"}
                written = entry.save(project)
                if written or graph_head(project).revision == revision:
                    break  # written, or failed with the graph where it was (logged)
                # A write landed between the refresh and the save: caught up with, again.
            head = entry.head
            if written and head is not None and not graph_head_reached(project=project, head=head):
                # The graph went back meanwhile (an erasure): the file describes none of it.
                path.unlink(missing_ok=True)
                written = False
        if written:
            log.info(
                "compiler index snapshot of project %s written at revision %d in process %d",
                project.slug,
                revision,
                os.getpid(),
            )
        return report | {"status": "written" if written else "failed"}
