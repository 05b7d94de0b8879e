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
episodes stamped with a later revision are fetched and replaced in the index, whose BM25
statistics then score exactly like a fresh build. A lock per project makes this thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from graph_app.domain.packing import PackItem, pack
from graph_app.domain.records import sha256_of
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
    RankParams,
    Visibility,
)
from graph_app.domain.tokenize import occurrence_terms, tokenize, tokenize_query
from graph_app.models import Episode, TemporalFact
from graph_app.selectors import facts_visible_at, graph_revision_current
from memoryproject.errors import validation_error
from memoryproject.models import Project
from memoryproject.timeutil import iso, parse_aware_datetime, utcnow
from memoryproject.tokens import count_tokens

MAX_TOKENS_MIN = 64
MAX_TOKENS_MAX = 32_000
QUERY_MAX_CHARS = 4_000
TITLE = "# Memory context"
FACTS_SECTION = "Facts"
# Relevance is normalised to the best match (1.0) and raised to this power before packing by
# utility per token: a flat curve would let many short, weak lines crowd out a strong one.
UTILITY_SHARPNESS = 10.0
# Candidates handed to the packer: enough lines to fill the budget several times over.
PACK_CANDIDATE_TOKENS = 4
PACK_CANDIDATES_MAX = 400
RANK_PARAMS = RankParams()
# Full lines may fill this share of the budget; the items after them come as previews: the
# episode's best-matching sentences in at most PREVIEW_TOKENS tokens, still cited.
FULL_SHARE = 0.35
PREVIEW_TOKENS = 16


# --- documents --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """What the compiler needs to render and report one document."""

    kind: str
    id: str
    citation: str
    line: str
    keep: int
    section: str
    order: tuple
    # facts only: to re-render as known at an earlier transaction time
    fact_fields: tuple = ()
    # episodes only: the user's own id, which the citation uses when it is citable
    external_id: str | None = None
    # tokens of ``line``, counted once when the document is indexed
    line_tokens: int = -1


def _ts(value: datetime | None, default: float = INF) -> float:
    return value.timestamp() if value is not None else default


FACT_FIELDS = (
    "id",
    "subject__slug",
    "subject__name",
    "predicate",
    "object_value",
    "object_entity__slug",
    "valid_from",
    "valid_until",
    "recorded_at",
    "closed_at",
    "superseded_by_id",
    "source_episode_id",
    "source_episode__title",
    "sha256",
)
EPISODE_FIELDS = (
    "id",
    "category",
    "title",
    "content",
    "files_touched",
    "entities_mentioned",
    "metadata",
    "occurred_at",
    "recorded_at",
    "external_id",
)


def fact_rows_changed_since(*, project: Project, revision: int) -> Iterator[dict[str, Any]]:
    """The facts created or changed after ``revision``, as plain rows with the names of their
    entities and source episode: building an index over 100,000 facts is dominated by model
    instantiation otherwise."""
    return (
        TemporalFact.objects.filter(project=project, revision__gt=revision)
        .order_by("revision", "id")
        .values(*FACT_FIELDS)
        .iterator(chunk_size=5000)
    )


def episode_rows_changed_since(*, project: Project, revision: int) -> Iterator[dict[str, Any]]:
    """The episodes recorded after ``revision``, as plain rows."""
    return (
        Episode.objects.filter(project=project, revision__gt=revision)
        .order_by("revision", "id")
        .values(*EPISODE_FIELDS)
        .iterator(chunk_size=5000)
    )


def _fact_status(row: dict[str, Any]) -> str:
    if row["valid_until"] is None:
        return "active"
    return "superseded" if row["superseded_by_id"] else "retracted"


def _fact_doc(row: dict[str, Any]) -> MemoryDoc:
    subject = row["subject__slug"]
    obj = row["object_entity__slug"]
    fields = dict(
        fact_id=row["id"],
        subject=subject,
        predicate=row["predicate"],
        object_value=row["object_value"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        status=_fact_status(row),
        source_episode=row["source_episode_id"],
        sha256=row["sha256"],
    )
    line, keep = fact_line(**fields)
    name = row["subject__name"] or ""
    text = fact_text(
        subject=subject,
        subject_name=name if name != subject else "",
        predicate=row["predicate"],
        object_value=row["object_value"],
        source_title=row["source_episode__title"] or "",
    )
    item = _Item(
        kind="fact",
        id=row["id"],
        citation=fact_citation(row["id"]),
        line=line,
        keep=keep,
        section=FACTS_SECTION,
        order=(0.0, 0),
        fact_fields=tuple(fields.items()),
        line_tokens=count_tokens(line),
    )
    return MemoryDoc(
        key=f"fact:{row['id']}",
        kind="fact",
        tokens=tuple(tokenize(text)),
        entities=(subject,) + ((obj,) if obj else ()),
        subject=subject,
        edge=(subject, obj) if obj else None,
        recorded_at=_ts(row["recorded_at"]),
        valid_from=_ts(row["valid_from"], -INF),
        valid_until=_ts(row["valid_until"]),
        closed_at=_ts(row["closed_at"]),
        payload=item,
    )


def _stream_of(metadata: Any) -> tuple[str | None, int | None]:
    if not isinstance(metadata, dict):
        return None, None
    stream, position = metadata.get("stream"), metadata.get("position")
    if not isinstance(stream, str) or not stream:
        return None, None
    if isinstance(position, bool) or not isinstance(position, int):
        return None, None
    return stream, position


def _episode_doc(row: dict[str, Any]) -> MemoryDoc:
    files = [str(f) for f in row["files_touched"] or []]
    occurred: datetime = row["occurred_at"]
    line, keep = episode_line(
        episode_id=row["id"],
        category=row["category"],
        title=row["title"],
        content=row["content"],
        occurred_at=None,  # the day is the heading of the episode's section
        files=files,
        external_id=row["external_id"],
    )
    text = episode_text(
        category=row["category"],
        title=row["title"],
        content=row["content"],
        files=files,
        occurred_at=occurred,
    )
    stream, position = _stream_of(row["metadata"])
    item = _Item(
        kind="episode",
        id=row["id"],
        citation=episode_citation(row["id"], row["category"], row["external_id"]),
        line=line,
        keep=keep,
        section=f"Episodes {day(occurred)}",
        order=(occurred.timestamp(), position if position is not None else 0),
        external_id=row["external_id"],
        line_tokens=count_tokens(line),
    )
    _warm_preview(line[keep:])
    return MemoryDoc(
        key=f"episode:{row['id']}",
        kind="episode",
        tokens=tuple(tokenize(text))
        + tuple(occurrence_terms(occurred.year, occurred.month, occurred.day)),
        entities=tuple(str(e) for e in row["entities_mentioned"] or []),
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

    def refresh(self, project: Project) -> int:
        """Brings the index up to the project's current revision; answers that revision."""
        current = graph_revision_current(project=project)
        if current < self.revision:
            # The graph went back in time (a restored backup, a rolled-back test): start over.
            self.revision, self.index, self.max_recorded = -1, MemoryIndex(), -INF
        if current == self.revision:
            return current
        since = max(self.revision, 0)
        for row in episode_rows_changed_since(project=project, revision=since):
            self._put(_episode_doc(row))
        for row in fact_rows_changed_since(project=project, revision=since):
            self._put(_fact_doc(row))
        self.revision = current
        return current

    def _put(self, doc: MemoryDoc) -> None:
        self.index.upsert(doc)
        self.max_recorded = max(self.max_recorded, doc.recorded_at)


_cache: dict[int, _ProjectIndex] = {}
_cache_lock = threading.Lock()


def _project_index(project: Project) -> _ProjectIndex:
    with _cache_lock:
        entry = _cache.get(project.pk)
        if entry is None:
            entry = _cache[project.pk] = _ProjectIndex()
        return entry


def compiler_cache_forget(project_pk: int) -> None:
    """Drops one project's cached index (e.g. once the project is deleted)."""
    with _cache_lock:
        _cache.pop(project_pk, None)


def compiler_cache_clear() -> None:
    """Forgets every cached index (they are rebuilt on the next compile)."""
    with _cache_lock:
        _cache.clear()


# --- validation -------------------------------------------------------------------------------


def _validate_query(query: object) -> str:
    if not isinstance(query, str):
        raise validation_error("query", "must be a non-empty string")
    text = query.strip()
    if not text:
        raise validation_error("query", "must not be empty")
    if len(text) > QUERY_MAX_CHARS:
        raise validation_error("query", f"at most {QUERY_MAX_CHARS} characters")
    return text


def _validate_max_tokens(value: object) -> int:
    rule = f"must be an integer from {MAX_TOKENS_MIN} to {MAX_TOKENS_MAX}"
    if isinstance(value, bool):
        raise validation_error("max_tokens", rule)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not MAX_TOKENS_MIN <= value <= MAX_TOKENS_MAX:
        raise validation_error("max_tokens", f"{rule}, got {value!r}")
    return value


def _validate_bool(value: object, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false", "1", "0"}:
        return value.strip().lower() in {"true", "1"}
    raise validation_error(field, f"must be true or false, got {value!r}")


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


def _line_as_known(item: _Item, view: dict[str, Any] | None) -> _Item:
    """A fact's line as it read at an earlier transaction time (closure not yet known)."""
    if item.kind != "fact" or view is None:
        return item
    fields = dict(item.fact_fields)
    if view.get("valid_until") is None and fields["valid_until"] is not None:
        fields.update(valid_until=None, status="active")
    fields["sha256"] = view.get("sha256") or fields["sha256"]
    line, keep = fact_line(**fields)
    return replace(item, line=line, keep=keep, line_tokens=-1)


def context_compile(
    *,
    project: Project,
    query: str,
    max_tokens: int = 1200,
    as_of: datetime | str | None = None,
    known_at: datetime | str | None = None,
    include_superseded: bool = False,
) -> dict[str, Any]:
    """The most relevant memory for ``query`` as cited markdown of at most ``max_tokens``.

    Superseded or retracted facts are left out (and counted in ``suppressed_stale``) unless
    ``include_superseded``. ``as_of``/``known_at`` compile what an agent would have received
    then: facts valid at ``as_of`` as known at ``known_at`` (either defaults to the other; a
    missing ``known_at`` alone means now), over the memory recorded by ``known_at``.
    """
    text = _validate_query(query)
    budget = _validate_max_tokens(max_tokens)
    as_of_dt = parse_aware_datetime(as_of, field="as_of")
    known_dt = parse_aware_datetime(known_at, field="known_at")
    history = _validate_bool(include_superseded, "include_superseded")

    entry = _project_index(project)
    views: dict[str, dict[str, Any]] = {}
    with entry.lock:
        revision = entry.refresh(project)
        index = entry.index
        if as_of_dt is None and known_dt is None:
            visibility = Visibility(include_superseded=history)
        else:
            known = known_dt or utcnow()
            at = as_of_dt or known
            if known.timestamp() < entry.max_recorded:
                # Replay: the statistics of the memory as it had been recorded by then.
                index = index.subset(
                    key for key, doc in index.docs.items() if doc.recorded_at <= known.timestamp()
                )
            if not history:
                # Each line shows the fact as then known, hash included.
                views = {
                    f"fact:{f.view['id']}": {**f.view, "sha256": sha256_of(f.canonical)}
                    for f in facts_visible_at(project=project, as_of=at, known_at=known)
                }
            visibility = Visibility(
                as_of=at.timestamp(),
                known_at=known.timestamp(),
                include_superseded=history,
                fact_keys=None if history else frozenset(views),
            )
        ranking = index.rank(text, visibility, RANK_PARAMS)
        # Taken under the lock: a concurrent refresh may replace documents afterwards.
        payloads = {key: index.docs[key].payload for key, _ in ranking.ranked}
        weights = {term: index.bm25.smooth_idf(term) for term in set(tokenize_query(text))}

    def preview(candidate: PackItem) -> PackItem | None:
        head, body = candidate.text[: candidate.keep], candidate.text[candidate.keep :]
        passage = best_passage(
            body, weights, tokenize=_terms, count=_count, max_tokens=PREVIEW_TOKENS
        )
        return None if passage is None else replace(candidate, text=head + passage)

    candidates: list[PackItem] = []
    line_counts: list[int] = []
    utilities = dict(ranking.ranked)
    total = 0
    for key, utility in ranking.ranked:
        item = payloads[key]
        assert isinstance(item, _Item)
        if views:
            item = _line_as_known(item, views.get(key))
        candidates.append(
            PackItem(
                key=key,
                text=item.line,
                utility=utility**UTILITY_SHARPNESS,
                section=item.section,
                keep=item.keep,
                truncatable=True,
                order=item.order,
                previewable=item.kind == "episode",
            )
        )
        line_counts.append(item.line_tokens)
        total += item.line_tokens if item.line_tokens >= 0 else _count(item.line)
        if total > PACK_CANDIDATE_TOKENS * budget or len(candidates) >= PACK_CANDIDATES_MAX:
            break
    # Lines were counted when indexed; everything else (framing, previews) is counted here.
    counted = {c.text: t for c, t in zip(candidates, line_counts, strict=True) if t >= 0}

    def count(text: str) -> int:
        tokens = counted.get(text)
        return tokens if tokens is not None else _count(text)

    packed = pack(
        candidates,
        max_tokens=budget,
        count=count,
        title=TITLE,
        sections=[FACTS_SECTION],
        preview=preview,
        full_share=FULL_SHARE,
    )

    items = []
    for packed_item in packed.items:
        item = payloads[packed_item.key]
        assert isinstance(item, _Item)
        items.append(
            {
                "kind": item.kind,
                "id": item.id,
                "external_id": item.external_id,
                "score": round(utilities[packed_item.key], 6),
                "tokens": packed_item.tokens,
                "citation": item.citation,
                "truncated": packed_item.truncated,
            }
        )
    return {
        "project": project.slug,
        "query": text,
        "markdown": packed.markdown,
        "token_count": packed.token_count,
        "max_tokens": budget,
        "as_of": iso(as_of_dt),
        "known_at": iso(known_dt),
        "include_superseded": history,
        "revision": revision,
        "items": items,
        "citations": [i["citation"] for i in items],
        "suppressed_stale": ranking.suppressed_stale,
    }
