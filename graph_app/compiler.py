"""The token-budgeted context compiler: the most relevant memory that fits ``max_tokens``.

``context_compile`` ranks a project's facts and episodes against a query (BM25 over
code-aware tokens, pseudo-relevance feedback, two-hop spreading activation, stream neighbours:
see ``graph_app/domain/memory_index.py``), keeps only what the request may see (active facts by
default; history with ``include_superseded``; the bi-temporal view with ``as_of``/``known_at``)
and packs the best cited lines under the budget, counted with the product's cl100k counter over
the final markdown: full lines first, then previews (each episode's best-matching sentences) so
that more sources fit. Flagged items are held back and named in a quarantine section.

The index it ranks is kept per project in process memory (``graph_app.index_cache``), its
documents built from the rows (``graph_app.index_documents``); proofs are
``graph_app.citation_proofs``'s, delivery to a caller with a receipt ``graph_app.delivery``'s.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field, replace
from typing import cast

from graph_app.citation_proofs import citation_bundle
from graph_app.contracts.compile import CompiledItem, CompileInput, CompileResult
from graph_app.contracts.facts import FactOut
from graph_app.domain.index_items import FACT_LINE_FIELDS, IndexItem
from graph_app.domain.memory_index import MemoryIndex, Ranking
from graph_app.domain.memory_store import Visibility
from graph_app.domain.packing import Packed, PackItem, pack, split_line
from graph_app.domain.profiles import PROFILES, Profile
from graph_app.domain.ranked_payloads import RankedPayloads, TakenPayloads
from graph_app.domain.render import best_passage, fact_line, preview_counted
from graph_app.domain.tiebreak import TieKey
from graph_app.domain.tokenize import tokenize_query
from graph_app.index_cache import ProjectIndex, project_index, query_vector
from graph_app.index_documents import FACTS_SECTION
from graph_app.text_cache import counted_tokens, sentence_terms
from graph_app.time_travel import facts_visible_at
from memoryproject.compliance import compliance
from memoryproject.contracts import takes
from memoryproject.domain.spotlight import PREAMBLE, Quarantined, quarantine_lines
from memoryproject.models import Project
from memoryproject.quarantine import items_released
from memoryproject.screening import quarantined_out
from memoryproject.timeutil import utcnow
from memoryproject.tokens import count_tokens, joined_tokens

TITLE = "# Memory context"
# The bundle's head: its title and, before any item, what the spotlight marks mean.
HEADER = f"{TITLE} ({PREAMBLE})"
# Candidates handed to the packer: enough lines to fill the budget several times over.
PACK_CANDIDATE_TOKENS = 4
PACK_CANDIDATES_MAX = 400
# A compile first ranks this many items per budget token (at least PACK_CANDIDATES_FIRST): the
# packer reads a few dozen (at 800 tokens, LoCoMo's dialogue: 71 of 343 ranked on average, 112 at
# most; the synthetic 100k graph: 49 of 339, 63 at most), and ordering the rest and taking their
# keys, payloads and tie-break keys was about a tenth of a compile. Only when the packer reads to
# the end of that ranking without filling its candidates is the query ranked again, at full
# length (PACK_CANDIDATES_MAX): the answer is always the full-length ranking's.
PACK_CANDIDATES_PER_TOKEN = 0.2
PACK_CANDIDATES_FIRST = 64


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


# The payloads of a ranking's items by key: all taken, or made as the packer reaches them.
Payloads = RankedPayloads[IndexItem] | TakenPayloads[IndexItem]


@dataclass(frozen=True)
class _Ranked:
    """A ranking with what it needs from the index, taken under the index's lock: a concurrent
    refresh may replace documents right after it."""

    revision: int
    ranking: Ranking
    payloads: Payloads
    # the query terms' smoothed IDF, which picks an episode's best-matching sentences
    weights: dict[str, float]
    # time travel without history: each fact as it was known then, by document key
    views: dict[str, FactOut]
    # fact id -> the open contradiction finding that names it
    conflicts: dict[str, int]
    # how the query was read and how its answer is packed
    profile: Profile
    # flagged documents a reviewer released (delivered like any other), by document key
    released: Container[str] = frozenset()
    # each payload's tie-break key (``tiebreak.tie_key``), by document key
    ties: Mapping[str, TieKey] = field(default_factory=dict)


def _visible(
    project: Project, entry: ProjectIndex, params: CompileInput
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
        index = index.subset(index.recorded_by(known.timestamp()))
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


def first_limit(budget: int) -> int:
    """How many items a compile under ``budget`` tokens ranks first (``PACK_CANDIDATES_FIRST``)."""
    wanted = max(PACK_CANDIDATES_FIRST, round(budget * PACK_CANDIDATES_PER_TOKEN))
    return min(PACK_CANDIDATES_MAX, wanted)


def _rank(
    project: Project, text: str, params: CompileInput, limit: int = PACK_CANDIDATES_MAX
) -> _Ranked:
    """Refreshes the project's index and ranks its (``limit`` best) visible documents against
    ``text``."""
    entry = project_index(project)
    profile = PROFILES[params.profile]
    with entry.lock:
        revision = entry.refresh(project)
        index, visibility, views = _visible(project, entry, params)
        ranked = rank_index(index, text, visibility, profile, limit)
    # Only facts are marked with their open findings: a ranking of episodes alone (a dialogue's
    # turns) asks nothing.
    has_facts = any(key.startswith("fact:") for key, _ in ranked.ranking.ranked)
    conflicts = compliance().open_findings_of_facts(project=project) if has_facts else {}
    released = _Releases(project, ranked.payloads)
    return replace(ranked, revision=revision, views=views, conflicts=conflicts, released=released)


class _Releases(Container[str]):
    """The flagged documents of a ranking a reviewer released, asked of the review queue once
    the packer reaches a flagged one, for every flagged payload made by then (flagged items are
    few: most compiles ask nothing, none asks more than once a chunk of payloads)."""

    def __init__(self, project: Project, payloads: Payloads) -> None:
        self._project = project
        self._payloads = payloads
        self._known: dict[str, bool] = {}

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or key not in self._payloads:
            return False
        if key not in self._known:
            self._payloads[key]  # made, with its chunk
            asked = {
                k: (item.kind, item.id, item.sha256)
                for k, item in self._payloads.made()
                if item.flags and k not in self._known
            }
            released = (
                items_released(project=self._project, items=list(asked.values())) if asked else []
            )
            self._known.update(dict.fromkeys(asked, False))
            self._known.update((f"{kind}:{id_}", True) for kind, id_ in released)
        return self._known.get(key, False)


def rank_index(
    index: MemoryIndex,
    text: str,
    visibility: Visibility,
    profile: Profile,
    limit: int = PACK_CANDIDATES_MAX,
) -> _Ranked:
    """Ranks the (``limit`` best) documents of ``index`` that ``visibility`` shows against
    ``text`` as ``profile`` reads it (no database access: evaluations call it directly)."""
    # The packer never looks past the first PACK_CANDIDATES_MAX items.
    ranking = index.rank(
        text,
        visibility,
        profile.rank,
        limit=min(limit, PACK_CANDIDATES_MAX),
        query_vector=query_vector(index, text),
    )
    keys = [key for key, _ in ranking.ranked]
    payloads = cast(Payloads, index.ranked_payloads(keys, ranking.slots))
    # Tie-break keys too are made as the packer reaches their items (from a restored index's
    # columns: most of a ranking's are never packed).
    ties = index.ranked_ties(keys, ranking.slots)
    # Previews weigh the terms the ranking used (a derived word form as its known stem).
    terms = set(ranking.terms or tokenize_query(text, drop=profile.rank.drop))
    weights = {term: index.bm25.smooth_idf(term) for term in terms}
    # A related term counts at its share: the passage naming "Spain" for "European countries".
    for term, share in ranking.related:
        weights.setdefault(term, share * index.bm25.smooth_idf(term))
    return _Ranked(-1, ranking, payloads, weights, {}, {}, profile, ties=ties)


def context_delivered(
    *, project: Project, query: str, max_tokens: int, profile: Profile
) -> tuple[str, list[tuple[str, str]]]:
    """The markdown a live compile of ``query`` would deliver under ``profile``, which may be a
    variant of a named one, and the (id, citation) of each item it cites: for evaluations that
    compare constants (agents use ``context_compile``)."""
    entry = project_index(project)
    with entry.lock:
        entry.refresh(project)
        live = Visibility(now=utcnow().timestamp())
        ranked = rank_index(entry.index, query.strip(), live, profile)
    packed = pack_ranked(ranked, max_tokens)
    cited = [(ranked.payloads[p.key].id, ranked.payloads[p.key].citation) for p in packed.items]
    return packed.markdown, cited


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


@dataclass
class _Candidates:
    """The best lines in rank order, enough to fill the budget several times over, the tokens
    of those counted when they were indexed, their utilities by key, the flagged items among
    them that are held back (quarantined), and whether the ranking ended before they filled."""

    items: list[PackItem]
    counted: dict[str, int]
    scores: dict[str, float]
    held: list[Quarantined]
    ran_out: bool
    # by key, the items whose preview's counts were counted when they were indexed
    previews: dict[str, IndexItem]


def _candidates(ranked: _Ranked, budget: int) -> _Candidates:
    """The ``_Candidates`` of a ranking for ``budget`` tokens."""
    candidates: list[PackItem] = []
    counted: dict[str, int] = {}
    scores: dict[str, float] = {}
    held: list[Quarantined] = []
    previews: dict[str, IndexItem] = {}
    total = 0
    for key, utility in ranked.ranking.ranked:
        item = ranked.payloads[key]
        if item.flags and key not in ranked.released:
            held.append(Quarantined(item.kind, item.id, tuple(item.flags.split("\n"))))
            if len(held) >= PACK_CANDIDATES_MAX:
                return _Candidates(candidates, counted, scores, held, False, previews)
            continue
        if ranked.views:
            item = _line_as_known(item, ranked.views.get(key))
        if item.kind == "fact" and item.id in ranked.conflicts:
            item = _line_in_conflict(item, ranked.conflicts[item.id])
        scores[key] = utility
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
                tie=ranked.ties[key],
                # a fact line's server-made parts never decide which fact is packed first
                nominal_tokens=item.nominal_tokens,
            )
        )
        if item.line_tokens >= 0:
            counted[item.line] = item.line_tokens
        if item.preview_tokens:
            # The citation a preview starts with is counted before the preview is built.
            counted[item.line[: item.keep]] = item.preview_tokens[0]
            previews[key] = item
        total += item.line_tokens if item.line_tokens >= 0 else counted_tokens(item.line)
        if total > PACK_CANDIDATE_TOKENS * budget or len(candidates) >= PACK_CANDIDATES_MAX:
            return _Candidates(candidates, counted, scores, held, False, previews)
    return _Candidates(candidates, counted, scores, held, True, previews)


@dataclass(frozen=True)
class _Bundle:
    """A packed bundle, the ranking's utility of each candidate it was packed from, and the
    flagged items its quarantine section names."""

    packed: Packed
    scores: dict[str, float]
    held: list[Quarantined]
    # the candidates read the whole ranking without filling (a longer one may hold more)
    ran_out: bool = False


# The quarantine section takes at most this share of the budget (else it names fewer items).
QUARANTINE_SHARE = 0.2


def _quarantine_section(held: list[Quarantined], budget: int) -> str:
    """The quarantine section that fits its share of ``budget`` ("" when none or none fits)."""
    while held:
        section = "\n" + "\n".join(quarantine_lines(held, heading="## "))
        if counted_tokens(section) <= budget * QUARANTINE_SHARE:
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
    chosen = _candidates(ranked, budget)
    candidates, counted, scores, held = chosen.items, chosen.counted, chosen.scores, chosen.held
    section = _quarantine_section(held, budget)

    def count(text: str) -> int:
        # Lines were counted when indexed; everything else (framing, previews) is counted here.
        tokens = counted.get(text)
        return tokens if tokens is not None else counted_tokens(text)

    def preview(candidate: PackItem) -> PackItem | None:
        head, body, tail = split_line(candidate)
        item = chosen.previews.get(candidate.key)
        known = (
            preview_counted(item.line, item.keep, item.tail, item.preview_tokens)
            if item is not None and item.line == candidate.text
            else {}
        )

        def sentence_count(text: str) -> int:
            tokens = known.get(text)
            return tokens if tokens is not None else counted_tokens(text)

        passage = best_passage(
            body,
            ranked.weights,
            tokenize=sentence_terms,
            count=sentence_count,
            max_tokens=ranked.profile.preview_tokens,
        )
        return None if passage is None else replace(candidate, text=head + passage + tail)

    reserve = counted_tokens(section) if section else 0
    packed = pack(
        candidates,
        max_tokens=budget - reserve,
        count=count,
        title=HEADER,
        sections=[FACTS_SECTION],
        preview=preview,
        full_share=ranked.profile.full_share,
        # A bundle is counted from its lines' counts, not kept in the cache of lines.
        count_lines=joined_tokens,
    )
    if not section or not packed.markdown:
        return _Bundle(packed, scores, [], chosen.ran_out)
    markdown = packed.markdown + section
    tokens = count_tokens(markdown)
    if tokens > budget:  # the join may count a token more than its parts: never over budget
        return _Bundle(packed, scores, [], chosen.ran_out)
    shown = section.count("\n- QUARANTINED ")
    packed = replace(packed, markdown=markdown, token_count=tokens)
    return _Bundle(packed, scores, held[:shown], chosen.ran_out)


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
    limit = first_limit(params.max_tokens)
    ranked = _rank(project, text, params, limit)
    bundle = _pack(ranked, params.max_tokens)
    if bundle.ran_out and limit < PACK_CANDIDATES_MAX and len(ranked.ranking.ranked) == limit:
        # The first ranking was too short for this budget: ranked again, at full length.
        ranked = _rank(project, text, params)
        bundle = _pack(ranked, params.max_tokens)
    packed, utilities = bundle.packed, bundle.scores
    items: list[tuple[TieKey, CompiledItem]] = []
    for packed_item in packed.items:
        item = ranked.payloads[packed_item.key]
        items.append(
            (
                ranked.ties[packed_item.key],
                # The values are typed already (the index's items, the packer's counts): built
                # without validating them again.
                CompiledItem.model_construct(
                    kind=item.kind,
                    id=item.id,
                    external_id=item.external_id,
                    score=round(utilities[packed_item.key], 6),
                    tokens=packed_item.tokens,
                    citation=item.citation,
                    truncated=packed_item.truncated,
                    sha256=_delivered_sha(ranked, packed_item.key, item),
                    open_finding=ranked.conflicts.get(item.id) if item.kind == "fact" else None,
                ),
            )
        )
    if params.order == "relevance":
        items.sort(key=lambda i: (-i[1].score, i[0]))
    delivered = [item for _, item in items]
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
        items=delivered,
        citations=[i.citation for i in delivered],
        suppressed_stale=ranked.ranking.suppressed_stale,
        quarantined=[quarantined_out(q) for q in bundle.held],
    )
    if params.with_proofs:
        result = result.model_copy(update={"proofs": citation_bundle(project, result)})
    return result
