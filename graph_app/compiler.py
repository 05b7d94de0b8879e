"""The token-budgeted context compiler: the most relevant memory that fits ``max_tokens``.

``context_compile`` ranks a project's facts and episodes against a query (BM25 over
code-aware tokens, pseudo-relevance feedback, two-hop spreading activation, stream neighbours:
see ``graph_app/domain/retrieval.py``), keeps only what the request may see (active facts by
default; history with ``include_superseded``; the bi-temporal view with ``as_of``/``known_at``)
and packs the best cited lines under the budget, counted with the product's cl100k counter over
the final markdown: full lines first, then previews (each episode's best-matching sentences) so
that more sources fit.

The tokenized index is kept per project in process memory, keyed by the project's graph
revision. A compile reads the revision (one small query); when it moved, only the facts and
episodes stamped with a later revision are fetched (``graph_app.index_selectors``) and replaced
in the index, whose BM25 statistics then score exactly like a fresh build. A lock per project
makes this thread-safe. Once a refresh has read ``COMPILER_SNAPSHOT_MIN_ROWS`` rows since the
last one, the index is written to a snapshot on disk (``graph_app.snapshot``), which the next
process loads instead of rebuilding; it then reads only the rows changed since.
``compiler_warm`` loads or builds every project's index up front: in a server's master process
before it forks, its workers share the indexes copy-on-write.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from sys import intern
from typing import Any

from django.conf import settings

from audit_app.checkpoint_reads import checkpoint_key
from audit_app.finding_selectors import open_findings_of_facts
from audit_app.services import injection_log_append
from graph_app.contracts.compile import (
    CompiledItem,
    CompileInput,
    CompileResult,
    InclusionProof,
    RootSignature,
    SignedRoot,
    SourceBundle,
    SourceItem,
)
from graph_app.contracts.graph import FactOut
from graph_app.domain.hashing import leaf_hash, merkle_root_of_leaf_hashes, sha256_hex
from graph_app.domain.index_items import FACT_LINE_FIELDS, IndexItem
from graph_app.domain.packing import Packed, PackItem, pack, split_line
from graph_app.domain.profiles import PROFILES, Profile, salience
from graph_app.domain.proofs import audit_path, record_times, root_sign, tree_levels
from graph_app.domain.render import (
    best_passage,
    day,
    episode_citation,
    episode_line,
    episode_text,
    fact_citation,
    fact_line,
    fact_text,
    sentences,
)
from graph_app.domain.retrieval import (
    INF,
    MemoryDoc,
    MemoryIndex,
    Ranking,
    Visibility,
)
from graph_app.domain.supersession import fact_status
from graph_app.domain.tokenize import (
    identifiers,
    occurrence_terms,
    split_identifier,
    tokenize,
    tokenize_query,
)
from graph_app.index_selectors import (
    episode_rows_changed_since,
    fact_rows_changed_since,
    graph_head_continues,
    graph_head_current,
    graph_head_reached,
)
from graph_app.quarantine_holds import deliveries_held
from graph_app.selectors import facts_visible_at, graph_leaves
from graph_app.snapshot import GraphHead, snapshot_forget, snapshot_read, snapshot_write
from memoryproject.contracts import Caller, takes
from memoryproject.domain.screening import record_screen
from memoryproject.domain.spotlight import PREAMBLE, Quarantined, flag_reasons, quarantine_lines
from memoryproject.errors import ConflictError
from memoryproject.models import Project
from memoryproject.quarantine import items_released
from memoryproject.screening import quarantined_out
from memoryproject.timeutil import iso, utcnow
from memoryproject.tokens import count_tokens, tokens_warm
from memoryproject.writes import write_transaction

log = logging.getLogger(__name__)

TITLE = "# Memory context"
# The bundle's head: its title and, before any item, what the spotlight marks mean.
HEADER = f"{TITLE} ({PREAMBLE})"
FACTS_SECTION = "Facts"
# Candidates handed to the packer: enough lines to fill the budget several times over.
PACK_CANDIDATE_TOKENS = 4
PACK_CANDIDATES_MAX = 400


_END_OF_TIME = datetime.max.replace(tzinfo=UTC)


# --- documents --------------------------------------------------------------------------------


def _ts(value: datetime | None, default: float = INF) -> float:
    return value.timestamp() if value is not None else default


def _fact_status(row: dict[str, Any]) -> str:
    # A line states how the fact ends, whenever that is: "superseded" once its successor's
    # time comes (lines are indexed once, not per instant).
    return fact_status(
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        superseded=row["superseded_by_id"] is not None,
        at=_END_OF_TIME,
    )


def _terms_of(text: str) -> tuple[str, ...]:
    # Interned: a project's documents share a few thousand distinct terms, held once in memory
    # (and once in a snapshot) instead of once per occurrence.
    return tuple(map(intern, tokenize(text)))


def _interned(value: str | None) -> str | None:
    return None if value is None else intern(value)


def _fact_doc(row: dict[str, Any]) -> MemoryDoc:
    subject = intern(row["subject__slug"])
    obj = _interned(row["object_entity__slug"])
    fields = dict(
        fact_id=row["id"],
        subject=subject,
        predicate=intern(row["predicate"]),
        object_value=row["object_value"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        status=intern(_fact_status(row)),
        source_episode=row["source_episode_id"],
        sha256=row["sha256"],
    )
    line, keep, tail = fact_line(**fields)
    name = row["subject__name"] or ""
    flags = flags_text(
        {
            "subject": subject,
            "subject_name": name,
            "predicate": row["predicate"],
            "object_value": row["object_value"],
        }
    )
    text = fact_text(
        subject=subject,
        subject_name=name if name != subject else "",
        predicate=row["predicate"],
        object_value=row["object_value"],
        source_title=row["source_episode__title"] or "",
    )
    item = IndexItem(
        kind="fact",
        id=row["id"],
        citation=fact_citation(row["id"]),
        line=line,
        keep=keep,
        section=FACTS_SECTION,
        order=(0.0, 0),
        fact_fields=tuple(fields[name] for name in FACT_LINE_FIELDS),
        line_tokens=count_tokens(line),
        sha256=row["sha256"],
        tail=tail,
        flags=flags,
    )
    return MemoryDoc(
        key=f"fact:{row['id']}",
        kind="fact",
        tokens=_terms_of(text),
        entities=(subject,) + ((obj,) if obj else ()),
        subject=subject,
        edge=(subject, obj) if obj else None,
        object_ref=None if obj else _interned(_entity_ref(row["object_value"])),
        salience=salience("fact"),
        recorded_at=_ts(row["recorded_at"]),
        valid_from=_ts(row["valid_from"], -INF),
        valid_until=_ts(row["valid_until"]),
        closed_at=_ts(row["closed_at"]),
        payload=item,
    )


def _entity_ref(value: str) -> str | None:
    """The object value of a fact as an entity id (lower-cased) when it reads as one: a single
    identifier such as ``payment_ledger`` or ``PaymentLedger``, not prose or a number."""
    value = value.strip()
    if not value or len(value) > 128 or " " in value or len(split_identifier(value)) < 2:
        return None
    return value.lower()


def _stream_of(metadata: Any) -> tuple[str | None, int | None]:
    if not isinstance(metadata, dict):
        return None, None
    stream, position = metadata.get("stream"), metadata.get("position")
    if not isinstance(stream, str) or not stream:
        return None, None
    if isinstance(position, bool) or not isinstance(position, int):
        return None, None
    return stream, position


def flags_text(fields: dict[str, Any]) -> str:
    """Why screening flags an item's recorded text, one reason a line ("" when clean): the
    item is then quarantined (memoryproject.domain.spotlight)."""
    return "\n".join(flag_reasons(record_screen(fields).flagged))


def _episode_doc(row: dict[str, Any]) -> MemoryDoc:
    files = [str(f) for f in row["files_touched"] or []]
    occurred: datetime = row["occurred_at"]
    line, keep, tail = episode_line(
        episode_id=row["id"],
        category=row["category"],
        title=row["title"],
        content=row["content"],
        occurred_at=None,  # the day is the heading of the episode's section
        files=files,
        external_id=row["external_id"],
    )
    flags = flags_text(
        {
            "title": row["title"],
            "content": row["content"],
            "files_touched": files,
            "external_id": row["external_id"] or "",
            "entities_mentioned": [str(e) for e in row["entities_mentioned"] or []],
        }
    )
    text = episode_text(
        category=row["category"],
        title=row["title"],
        content=row["content"],
        files=files,
        occurred_at=occurred,
    )
    stream, position = _stream_of(row["metadata"])
    stream = _interned(stream)
    item = IndexItem(
        kind="episode",
        id=row["id"],
        citation=episode_citation(row["id"], row["category"], row["external_id"]),
        line=line,
        keep=keep,
        section=intern(f"Episodes {day(occurred)}"),
        order=(occurred.timestamp(), position if position is not None else 0),
        external_id=row["external_id"],
        line_tokens=count_tokens(line),
        sha256=row["sha256"],
        tail=tail,
        flags=flags,
    )
    _warm_preview(line[keep : len(line) - tail])
    return MemoryDoc(
        key=f"episode:{row['id']}",
        kind="episode",
        tokens=_terms_of(text)
        + tuple(map(intern, occurrence_terms(occurred.year, occurred.month, occurred.day))),
        entities=tuple(intern(str(e)) for e in row["entities_mentioned"] or []),
        mentions=tuple(map(intern, sorted(identifiers(f"{row['title']} {row['content']}")))),
        title_terms=_terms_of(row["title"]),
        salience=salience(row["category"]),
        stream=stream,
        position=position,
        recorded_at=_ts(row["recorded_at"]),
        valid_from=_ts(occurred, -INF),
        payload=item,
    )


# --- the per-project cache --------------------------------------------------------------------


class _ProjectIndex:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.revision = -1
        self.index = MemoryIndex()
        self.max_recorded = -INF
        # Rows read from the database into this index, and since its last snapshot was written.
        self.rows_read = 0
        self.rows_unsaved = 0
        # The revision of the snapshot this index was loaded from (-1: built from the rows).
        self.restored = -1
        # The graph's head when the index last caught up with it (None: not yet).
        self.head: GraphHead | None = None

    def refresh(self, project: Project) -> int:
        """Brings the index up to the project's current revision; answers that revision. A new
        process starts from the project's snapshot when it still describes the graph."""
        if self.revision < 0:
            self._restore(project)
        head = graph_head_current(project=project)
        current = head.revision
        if self.head is not None and not graph_head_continues(
            project=project, head=self.head, current=head
        ):
            # The graph went back in time (a restored backup, a rolled-back write), perhaps
            # moving on since to the same revision with other rows: start over.
            self.revision, self.index, self.max_recorded = -1, MemoryIndex(), -INF
        self.head = head
        if current == self.revision:
            return current
        since = max(self.revision, 0)
        rows = 0
        for row in episode_rows_changed_since(project=project, revision=since):
            self._put(_episode_doc(row))
            rows += 1
        for row in fact_rows_changed_since(project=project, revision=since):
            self._put(_fact_doc(row))
            rows += 1
        if since == 0 and rows:
            # A build from the rows (no index, no usable snapshot): what a warm start avoids.
            log.info(
                "compiler index of project %s built from %d rows in process %d",
                project.slug,
                rows,
                os.getpid(),
            )
        self.revision = current
        self.rows_read += rows
        self.rows_unsaved += rows
        if self.rows_unsaved >= settings.COMPILER_SNAPSHOT_MIN_ROWS:
            self._save(project)
        return current

    def _restore(self, project: Project) -> None:
        snapshot = snapshot_read(project.pk)
        if snapshot is None or not graph_head_reached(project=project, head=snapshot.head):
            return
        self.index, self.max_recorded = snapshot.index, snapshot.max_recorded
        self.revision = self.restored = snapshot.head.revision
        self.head = snapshot.head
        _settle()
        log.info(
            "compiler index of project %s loaded from its snapshot (revision %d) in process %d",
            project.slug,
            self.revision,
            os.getpid(),
        )

    def _save(self, project: Project) -> None:
        head = graph_head_current(project=project)
        # Saved only as of a revision the index has reached, with that revision's log head.
        if (
            head.revision == self.revision
            and head.changes > 0
            and snapshot_write(project.pk, head, self.index, self.max_recorded)
        ):
            self.rows_unsaved = 0
        _settle()

    def _put(self, doc: MemoryDoc) -> None:
        self.index.upsert(doc)
        self.max_recorded = max(self.max_recorded, doc.recorded_at)


def _settle() -> None:
    """Moves the objects of a freshly built or loaded index out of the garbage collector's
    generations: they live as long as the process, and a full collection scanning them again
    and again would stall compiles (and, in forked workers, unshare copy-on-write pages)."""
    gc.freeze()


_cache: dict[int, _ProjectIndex] = {}
_cache_lock = threading.Lock()


def _project_index(project: Project) -> _ProjectIndex:
    with _cache_lock:
        entry = _cache.get(project.pk)
        if entry is None:
            entry = _cache[project.pk] = _ProjectIndex()
        return entry


def compiler_cache_forget(project_pk: int) -> None:
    """Drops one project's cached index and its snapshot (e.g. once the project is deleted or
    a record erased: erased text must not stay on disk)."""
    with _cache_lock:
        _cache.pop(project_pk, None)
        snapshot_forget(project_pk)


def compiler_warm(*, projects: Iterable[Project] | None = None) -> dict[str, int]:
    """Loads (from its snapshot) or builds the index of every project (or of ``projects``): in
    a server's master process before it forks its workers, which then share the indexes
    copy-on-write instead of each loading its own. Answers each index's revision by slug."""
    tokens_warm()  # the tokenizer loads and runs once, in the process that forks
    warmed: dict[str, int] = {}
    for project in Project.objects.order_by("pk") if projects is None else projects:
        entry = _project_index(project)
        with entry.lock:
            warmed[project.slug] = entry.refresh(project)
            entry.index.bm25.prepare()
    _settle()
    log.info("compiler indexes warmed in process %d: %s", os.getpid(), warmed)
    return warmed


def compiler_cache_stats(project_pk: int) -> dict[str, int] | None:
    """How this process holds one project's index: its revision, the rows it read from the
    database, and the snapshot revision it was loaded from (-1: none). None: not loaded."""
    with _cache_lock:
        entry = _cache.get(project_pk)
    if entry is None:
        return None
    return {"revision": entry.revision, "rows_read": entry.rows_read, "restored": entry.restored}


def compiler_cache_clear() -> None:
    """Forgets every cached index (they are rebuilt on the next compile)."""
    with _cache_lock:
        _cache.clear()


# --- compiling --------------------------------------------------------------------------------


@lru_cache(maxsize=100_000)
def _count(text: str) -> int:
    return count_tokens(text)


@lru_cache(maxsize=100_000)
def _terms(sentence: str) -> tuple[str, ...]:
    # An episode's sentences are the same from one compile to the next: tokenize them once.
    return tuple(tokenize(sentence))


def _warm_preview(body: str) -> None:
    """Splits and counts an episode's sentences when it is indexed, so that building its
    preview at compile time finds everything cached instead of paying for it per first query."""
    parts = sentences(body)
    _count(" ".join(parts))
    for part in parts:
        _terms(part)
        _count(part)
        _count(" " + part)


def _line_as_known(item: IndexItem, known: FactOut | None) -> IndexItem:
    """A fact's line as it read at an earlier transaction time (closure not yet known)."""
    if item.kind != "fact" or known is None:
        return item
    fields = dict(zip(FACT_LINE_FIELDS, item.fact_fields, strict=True))
    if known.valid_until is None and fields["valid_until"] is not None:
        fields.update(valid_until=None, status="active")
    fields["sha256"] = known.sha256 or fields["sha256"]
    line, keep, tail = fact_line(**fields)
    return replace(item, line=line, keep=keep, tail=tail, line_tokens=-1, sha256=fields["sha256"])


@dataclass(frozen=True)
class _Ranked:
    """A ranking with what it needs from the index, taken under the index's lock: a concurrent
    refresh may replace documents right after it."""

    revision: int
    ranking: Ranking
    payloads: dict[str, IndexItem]
    # the query terms' smoothed IDF, which picks an episode's best-matching sentences
    weights: dict[str, float]
    # time travel without history: each fact as it was known then, by document key
    views: dict[str, FactOut]
    # fact id -> the open contradiction finding that names it
    conflicts: dict[str, int]
    # how the query was read and how its answer is packed
    profile: Profile
    # flagged documents a reviewer released (delivered like any other), by document key
    released: frozenset[str] = frozenset()


def _visible(
    project: Project, entry: _ProjectIndex, params: CompileInput
) -> tuple[MemoryIndex, Visibility, dict[str, FactOut]]:
    """What a compile sees: the live memory, or at ``as_of``/``known_at`` the facts valid at
    ``as_of`` (default ``known_at``) as known at ``known_at`` (default now), over the memory
    recorded by then. Called under the entry's lock."""
    if params.as_of is None and params.known_at is None:
        live = Visibility(include_superseded=params.include_superseded, now=utcnow().timestamp())
        return entry.index, live, {}
    known = params.known_at or utcnow()
    at = params.as_of or known
    index = entry.index
    if known.timestamp() < entry.max_recorded:
        # Replay: the statistics of the memory as it had been recorded by then.
        index = index.subset(
            key for key, doc in index.docs.items() if doc.recorded_at <= known.timestamp()
        )
    views: dict[str, FactOut] = {}
    if not params.include_superseded:
        # Each line shows the fact as then known, hash included.
        views = {
            f"fact:{f.fact.id}": f.fact
            for f in facts_visible_at(project=project, as_of=at, known_at=known)
        }
    visibility = Visibility(
        as_of=at.timestamp(),
        known_at=known.timestamp(),
        include_superseded=params.include_superseded,
        fact_keys=None if params.include_superseded else frozenset(views),
    )
    return index, visibility, views


def _rank(project: Project, text: str, params: CompileInput) -> _Ranked:
    """Refreshes the project's index and ranks its visible documents against ``text``."""
    entry = _project_index(project)
    profile = PROFILES[params.profile]
    with entry.lock:
        revision = entry.refresh(project)
        index, visibility, views = _visible(project, entry, params)
        ranked = rank_index(index, text, visibility, profile)
    conflicts = open_findings_of_facts(project=project)
    flagged = [(item.kind, item.id, item.sha256) for item in ranked.payloads.values() if item.flags]
    released = (
        frozenset(f"{kind}:{id_}" for kind, id_ in items_released(project=project, items=flagged))
        if flagged
        else frozenset()
    )
    return replace(ranked, revision=revision, views=views, conflicts=conflicts, released=released)


def rank_index(index: MemoryIndex, text: str, visibility: Visibility, profile: Profile) -> _Ranked:
    """Ranks the documents of ``index`` that ``visibility`` shows against ``text`` as
    ``profile`` reads it (no database access: evaluations call it directly)."""
    # The packer never looks past the first PACK_CANDIDATES_MAX items.
    ranking = index.rank(text, visibility, profile.rank, limit=PACK_CANDIDATES_MAX)
    docs = index.docs
    payloads = {key: _payload(docs[key]) for key, _ in ranking.ranked[:PACK_CANDIDATES_MAX]}
    # Previews weigh the terms the ranking used (a derived word form as its known stem).
    terms = set(ranking.terms or tokenize_query(text, drop=profile.rank.drop))
    weights = {term: index.bm25.smooth_idf(term) for term in terms}
    # A related term counts at its share: the passage naming "Spain" for "European countries".
    for term, share in ranking.related:
        weights.setdefault(term, share * index.bm25.smooth_idf(term))
    return _Ranked(-1, ranking, payloads, weights, {}, {}, profile)


def context_cited(*, project: Project, query: str, max_tokens: int, profile: Profile) -> list[str]:
    """The ids a live compile of ``query`` would cite under ``profile``, which may be a variant
    of a named one: for evaluations that compare constants (agents use ``context_compile``)."""
    entry = _project_index(project)
    with entry.lock:
        entry.refresh(project)
        live = Visibility(now=utcnow().timestamp())
        ranked = rank_index(entry.index, query.strip(), live, profile)
    return [ranked.payloads[p.key].id for p in pack_ranked(ranked, max_tokens).items]


def _payload(doc: MemoryDoc) -> IndexItem:
    item = doc.payload
    assert isinstance(item, IndexItem)
    return item


def _delivered_sha(ranked: _Ranked, key: str, item: IndexItem) -> str:
    """The content hash of the source as delivered: in a replay, a fact's as then known."""
    known = ranked.views.get(key)
    return known.sha256 if known is not None else item.sha256


def _line_in_conflict(item: IndexItem, finding: int) -> IndexItem:
    """A fact's line marked, right after its citation, with the open finding that names it."""
    mark = f" [CONFLICT:#{finding}]"
    at = len(item.citation)
    line = item.line[:at] + mark + item.line[at:]
    return replace(item, line=line, keep=item.keep + len(mark), line_tokens=-1)


def _candidates(
    ranked: _Ranked, budget: int
) -> tuple[list[PackItem], dict[str, int], list[Quarantined]]:
    """The best lines in rank order, enough to fill the budget several times over, the
    tokens of those counted when they were indexed, and the flagged items among them that
    are held back (quarantined)."""
    candidates: list[PackItem] = []
    counted: dict[str, int] = {}
    held: list[Quarantined] = []
    total = 0
    for key, utility in ranked.ranking.ranked:
        item = ranked.payloads[key]
        if item.flags and key not in ranked.released:
            held.append(Quarantined(item.kind, item.id, tuple(item.flags.split("\n"))))
            if len(held) >= PACK_CANDIDATES_MAX:
                break
            continue
        if ranked.views:
            item = _line_as_known(item, ranked.views.get(key))
        if item.kind == "fact" and item.id in ranked.conflicts:
            item = _line_in_conflict(item, ranked.conflicts[item.id])
        candidates.append(
            PackItem(
                key=key,
                text=item.line,
                utility=utility**ranked.profile.sharpness,
                section=item.section,
                keep=item.keep,
                tail=item.tail,
                truncatable=True,
                order=item.order,
                previewable=item.kind == "episode",
            )
        )
        if item.line_tokens >= 0:
            counted[item.line] = item.line_tokens
        total += item.line_tokens if item.line_tokens >= 0 else _count(item.line)
        if total > PACK_CANDIDATE_TOKENS * budget or len(candidates) >= PACK_CANDIDATES_MAX:
            break
    return candidates, counted, held


@dataclass(frozen=True)
class _Bundle:
    """A packed bundle and the flagged items its quarantine section names."""

    packed: Packed
    held: list[Quarantined]


# The quarantine section takes at most this share of the budget (else it names fewer items).
QUARANTINE_SHARE = 0.2


def _quarantine_section(held: list[Quarantined], budget: int) -> str:
    """The quarantine section that fits its share of ``budget`` ("" when none or none fits)."""
    while held:
        section = "\n" + "\n".join(quarantine_lines(held, heading="## "))
        if _count(section) <= budget * QUARANTINE_SHARE:
            return section
        held = held[: len(held) // 2]
    return ""


def pack_ranked(ranked: _Ranked, budget: int) -> Packed:
    """The cited markdown of the best candidates that fits ``budget``: full lines first, then
    previews; flagged items are left out (``compile_bundle`` names them)."""
    return _pack(ranked, budget).packed


def _pack(ranked: _Ranked, budget: int) -> _Bundle:
    """The bundle of ``pack_ranked`` closed by the quarantine section naming the flagged items
    left out, all within ``budget``."""
    candidates, counted, held = _candidates(ranked, budget)
    section = _quarantine_section(held, budget)

    def count(text: str) -> int:
        # Lines were counted when indexed; everything else (framing, previews) is counted here.
        tokens = counted.get(text)
        return tokens if tokens is not None else _count(text)

    def preview(candidate: PackItem) -> PackItem | None:
        head, body, tail = split_line(candidate)
        passage = best_passage(
            body,
            ranked.weights,
            tokenize=_terms,
            count=_count,
            max_tokens=ranked.profile.preview_tokens,
        )
        return None if passage is None else replace(candidate, text=head + passage + tail)

    reserve = _count(section) if section else 0
    packed = pack(
        candidates,
        max_tokens=budget - reserve,
        count=count,
        title=HEADER,
        sections=[FACTS_SECTION],
        preview=preview,
        full_share=ranked.profile.full_share,
    )
    if not section or not packed.markdown:
        return _Bundle(packed, [])
    markdown = packed.markdown + section
    tokens = _count(markdown)
    if tokens > budget:  # the join may count a token more than its parts: never over budget
        return _Bundle(packed, [])
    shown = section.count("\n- QUARANTINED ")
    return _Bundle(replace(packed, markdown=markdown, token_count=tokens), held[:shown])


@takes(CompileInput)
def context_compile(*, project: Project, params: CompileInput) -> CompileResult:
    """The most relevant memory for ``params.query`` as cited markdown of at most
    ``params.max_tokens`` tokens.

    Superseded or retracted facts are left out (and counted in ``suppressed_stale``) unless
    ``include_superseded``. ``as_of``/``known_at`` compile what an agent would have received
    then: facts valid at ``as_of`` as known at ``known_at`` (``as_of`` defaults to
    ``known_at``, ``known_at`` to now), over the memory recorded by ``known_at``.
    """
    text = params.query.strip()
    ranked = _rank(project, text, params)
    bundle = _pack(ranked, params.max_tokens)
    packed = bundle.packed
    utilities = dict(ranked.ranking.ranked)
    items = []
    for packed_item in packed.items:
        item = ranked.payloads[packed_item.key]
        items.append(
            CompiledItem(
                kind=item.kind,
                id=item.id,
                external_id=item.external_id,
                score=round(utilities[packed_item.key], 6),
                tokens=packed_item.tokens,
                citation=item.citation,
                truncated=packed_item.truncated,
                sha256=_delivered_sha(ranked, packed_item.key, item),
                open_finding=ranked.conflicts.get(item.id) if item.kind == "fact" else None,
            )
        )
    if params.order == "relevance":
        items.sort(key=lambda i: (-i.score, i.citation))
    result = CompileResult(
        project=project.slug,
        query=text,
        markdown=packed.markdown,
        token_count=packed.token_count,
        max_tokens=params.max_tokens,
        as_of=params.as_of,
        known_at=params.known_at,
        include_superseded=params.include_superseded,
        revision=ranked.revision,
        items=items,
        citations=[i.citation for i in items],
        suppressed_stale=ranked.ranking.suppressed_stale,
        quarantined=[quarantined_out(q) for q in bundle.held],
    )
    if params.with_proofs:
        result = result.model_copy(update={"proofs": citation_bundle(project, result)})
    return result


# --- proving ----------------------------------------------------------------------------------


def _root_signed(root: SignedRoot) -> SignedRoot:
    """The root signed like audit checkpoints (HMAC-SHA256, AUDIT_CHECKPOINT_KEY); unsigned, and
    saying so, when no key is set. A key set but too short is refused, as for checkpoints."""
    if not getattr(settings, "AUDIT_CHECKPOINT_KEY", ""):
        return root
    mac = root_sign(root.as_json(), checkpoint_key())
    return root.model_copy(update={"signed": True, "signature": RootSignature(hmac=mac)})


def citation_bundle(project: Project, result: CompileResult) -> SourceBundle:
    """The compiled items with their full records and RFC 6962 inclusion proofs against the
    graph's Merkle root over every record (the root integrity verification computes)."""
    graph = graph_leaves(project=project)
    levels = tree_levels([leaf_hash(data) for data in graph.leaves])
    position = {key: index for index, key in enumerate(graph.keys)}
    size = len(graph.leaves)
    items = []
    for item in result.items:
        index = position.get((item.kind, item.id))
        if index is None:
            raise ConflictError(
                f"{item.kind} {item.id} left the memory while its proof was made: compile again"
            )
        data = graph.leaves[index]
        record = json.loads(data)
        items.append(
            SourceItem(
                id=item.id,
                kind=item.kind,
                citation=item.citation,
                text=data.decode("utf-8"),
                sha256=sha256_hex(data),
                proof=InclusionProof(
                    leaf_index=index,
                    tree_size=size,
                    audit_path=[h.hex() for h in audit_path(levels, index)],
                ),
                **record_times(record),
            )
        )
    root = SignedRoot(
        project=project.slug,
        revision=graph.revision,
        tree_size=size,
        root=merkle_root_of_leaf_hashes(levels[-1]).hex(),
        time=str(iso(utcnow())),
        signed=False,
        signature=None,
    )
    return SourceBundle(
        project=project.slug, query=result.query, root=_root_signed(root), items=items
    )


# --- delivering -------------------------------------------------------------------------------


def delivery_receipt(
    *,
    project: Project,
    caller: Caller,
    params: CompileInput,
    result: CompileResult,
    text: str,
    source: str = "compile",
) -> int:
    """Appends the receipt of compiled memory delivered to a caller: what was asked, every
    source delivered with its content hash, and the SHA-256 of ``text``, the exact text
    delivered (the bundle, or the prompt built around it). Answers the receipt's id. Call in
    the transaction that answers."""
    record = injection_log_append(
        project=project,
        channel=caller.channel,
        client=caller.client,
        client_reported=caller.client_reported,
        status="injected",
        decision="",
        trust_score=1.0,
        threshold=0.0,
        mode=source,
        trace_ids=[],
        system_prompt=text,
        generated_at=utcnow(),
        source=source,
        request=params.model_dump(mode="json"),
        items=[{"kind": i.kind, "id": i.id, "sha256": i.sha256} for i in result.items],
    )
    return int(record.pk)


@takes(CompileInput)
def context_deliver(*, project: Project, params: CompileInput, caller: Caller) -> CompileResult:
    """``context_compile`` for a caller (REST, MCP): the bundle, answered only once its
    receipt is committed to the injection log; the answer names the receipt
    (``injection_id``). The compile reads outside the write turn: on SQLite a transaction
    around it would hold the database's one write lock for the whole compile (about a second
    with proofs at 100k facts), and every writer would wait."""
    result = context_compile(project=project, params=params)
    with write_transaction():
        deliveries_held(project=project, held=result.quarantined)
        receipt = delivery_receipt(
            project=project, caller=caller, params=params, result=result, text=result.markdown
        )
    return result.model_copy(update={"injection_id": receipt})
