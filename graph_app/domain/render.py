"""How memory items read in a compiled bundle, and what text of them is indexed.

Every line starts with its citation (``[FACT:id]``, ``[ADR:id]``, ...) so an agent can quote the
source of anything it uses; an episode with a short, unambiguous external id is cited by it
(``[ADR:ADR-0012]``). Lines are compact (one line per item, whitespace collapsed, dates as
YYYY-MM-DD) so more items fit a budget, and a line can be shown as a preview: the sentences of
the item that best match the query. Pure Python: no Django import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache

from graph_app.domain.tokenize import month_words
from graph_app.domain.working_set import WORKING_SET
from memoryproject.domain.spotlight import CLOSE, OPEN, neutral

EPISODE_TAGS = {
    "adr": "ADR",
    "bug_root_cause": "BUG",
    "invariant": "INVARIANT",
    "session_note": "NOTE",
    "migration": "MIGRATION",
    "incident": "INCIDENT",
}
# Words indexed with an episode's category so "invariants of X" finds X's invariant episodes.
CATEGORY_WORDS = {
    "adr": "architecture decision record ADR",
    "bug_root_cause": "bug root cause",
    "invariant": "invariant",
    "session_note": "note",
    "migration": "migration",
    "incident": "incident",
}
_SPACE_RE = re.compile(r"\s+")
ELLIPSIS = "…"


def one_line(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip()


def day(value: datetime | None) -> str:
    return value.date().isoformat() if value is not None else "?"


def episode_tag(category: str) -> str:
    return EPISODE_TAGS.get(category, category.upper() or "EPISODE")


def fact_citation(fact_id: str) -> str:
    return f"[FACT:{fact_id}]"


# An external id short and plain enough to cite in place of the internal one. It stays
# unambiguous: external ids are unique per project, and one that could be read as an internal
# id (``ep_...``, ``fact_...``) or that holds brackets or spaces is never used.
_CITABLE_EXTERNAL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/#-]{0,23}")
_INTERNAL_PREFIX_RE = re.compile(r"(ep|fact)_", re.IGNORECASE)


def citable_external_id(external_id: str | None) -> str | None:
    """``external_id`` when it may stand for its episode in a citation, else None."""
    if not external_id or not _CITABLE_EXTERNAL_RE.fullmatch(external_id):
        return None
    if _INTERNAL_PREFIX_RE.match(external_id):
        return None
    return external_id


def episode_ref(episode_id: str, external_id: str | None = None) -> str:
    """How a line names its episode: the user's own short id (``ADR-0012``, ``INC-431``,
    ``D3:12``) when there is a citable one, the internal id otherwise."""
    return citable_external_id(external_id) or episode_id


def episode_citation(episode_id: str, category: str, external_id: str | None = None) -> str:
    return f"[{episode_tag(category)}:{episode_ref(episode_id, external_id)}]"


_CITATION_RE = re.compile(r"\[([A-Z_]+):([^\[\]\s]+)\]")


def cited_id(reference: str) -> str:
    """The id inside a citation as a bundle shows it (``[ADR:ADR-12]`` -> ``ADR-12``,
    ``[FACT:fact_...]`` -> ``fact_...``); any other text as it is."""
    match = _CITATION_RE.fullmatch(reference.strip())
    return match.group(2) if match else reference.strip()


def fact_line(
    *,
    fact_id: str,
    subject: str,
    predicate: str,
    object_value: str,
    valid_from: datetime,
    valid_until: datetime | None,
    status: str,
    source_episode: str | None,
    sha256: str,
) -> tuple[str, int, int]:
    """(line, length of the head that is never truncated, length of the tail that is never
    truncated). The recorded text (subject, predicate, value) stands between the spotlight
    marks; the citation, dates and hash, which the service writes, outside them."""
    head = f"{fact_citation(fact_id)} {OPEN}{neutral(subject)} --({neutral(predicate)})--> "
    when = f"valid_from={day(valid_from)}"
    if valid_until is not None:
        when += f", valid_until={day(valid_until)}, {status}"
    if source_episode:
        when += f", src={source_episode}"
    tail = f"{CLOSE} ({when}) @sha256:{sha256[:8]}"
    return f"{head}{neutral(one_line(object_value))}{tail}", len(head), len(tail)


def episode_line(
    *,
    episode_id: str,
    category: str,
    title: str,
    content: str,
    occurred_at: datetime | None,
    files: Sequence[str],
    external_id: str | None = None,
) -> tuple[str, int, int]:
    """(line, length of the head that is never truncated: citation, title, date, files; length
    of the tail, 0). ``occurred_at`` None leaves the date out (when a section heading already
    gives the day). The recorded text runs from the opening spotlight mark to the end of the
    line (a line holds one item and recorded text never a line break): no closing mark, one
    token less per item (docs/spotlighting.md)."""
    head = f"{episode_citation(episode_id, category, external_id)} {OPEN}{neutral(one_line(title))}"
    if occurred_at is not None:
        head += f" ({day(occurred_at)})"
    if files:
        head += f" | files: {neutral(', '.join(files))}"
    head += " | "
    return head + neutral(one_line(content)), len(head), 0


def fact_text(
    *, subject: str, subject_name: str, predicate: str, object_value: str, source_title: str
) -> str:
    """The text BM25 indexes for a fact."""
    return " ".join(p for p in (subject, subject_name, predicate, object_value, source_title) if p)


def episode_text(
    *, category: str, title: str, content: str, files: Sequence[str], occurred_at: datetime | None
) -> str:
    """The text BM25 indexes for an episode: its words, files, category and month/year."""
    parts = [title, content, " ".join(files), CATEGORY_WORDS.get(category, category)]
    if occurred_at is not None:
        parts.append(month_words(occurred_at.year, occurred_at.month))
    return " ".join(p for p in parts if p)


# Sentence ends: a full stop, question or exclamation mark (or an ellipsis) before a space.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?…])\s+")


@lru_cache(maxsize=WORKING_SET)
def sentences(text: str) -> tuple[str, ...]:
    """The sentences of ``text``, whitespace collapsed (cached: an item's content is previewed
    again for every query it matches)."""
    return tuple(s for s in _SENTENCE_END_RE.split(one_line(text)) if s)


def preview_counts(line: str, keep: int, tail: int, count: Callable[[str], int]) -> tuple[int, ...]:
    """The tokens of what a preview of ``line`` counts before it is built (``best_passage`` over
    its body, the text between ``keep`` and ``tail``): its citation (``line[:keep]``), its
    sentences joined, then each sentence alone and after a space. Counted once, when the item
    is indexed, and kept with it (a restored index reads them from its snapshot), so that a
    compile previewing the item counts only the preview it builds."""
    parts = sentences(line[keep : len(line) - tail])
    counts = [count(line[:keep]), count(" ".join(parts))]
    for part in parts:
        counts += (count(part), count(" " + part))
    return tuple(counts)


def preview_counted(line: str, keep: int, tail: int, tokens: Sequence[int]) -> dict[str, int]:
    """The texts ``preview_counts`` counted for ``line``, each with its count in ``tokens`` (empty
    when ``tokens`` are not counts of this line's sentences)."""
    parts = sentences(line[keep : len(line) - tail])
    if len(tokens) != 2 + 2 * len(parts):
        return {}
    counted = {line[:keep]: tokens[0], " ".join(parts): tokens[1]}
    for at, part in enumerate(parts, start=1):
        counted[part] = tokens[2 * at]
        counted[" " + part] = tokens[2 * at + 1]
    return counted


def best_passage(
    content: str,
    weights: Mapping[str, float],
    *,
    tokenize: Callable[[str], Sequence[str]],
    count: Callable[[str], int],
    max_tokens: int,
) -> str | None:
    """The sentences of ``content`` that best match the query, within ``max_tokens``, with
    ``…`` where text was left out; None when the whole content already fits.

    A sentence scores the summed ``weights`` of the distinct query terms it holds (the earliest
    wins a tie, so an unmatched item previews its opening); the passage then grows with the
    following, then the preceding sentences while it fits."""
    parts = sentences(content)
    if not parts or count(" ".join(parts)) <= max_tokens:
        return None

    def weight(text: str) -> float:
        return sum(weights.get(t, 0.0) for t in set(tokenize(text)))

    scores = [weight(s) for s in parts]
    best = max(range(len(parts)), key=lambda i: (scores[i], -i))
    first = last = best
    used = count(parts[best])
    if used > max_tokens:
        window = _best_window(parts[best], weight, count=count, budget=max_tokens)
        if window is None:
            return None
        start, end, words = window
        lead = ELLIPSIS + " " if best > 0 or start > 0 else ""
        tail = " " + ELLIPSIS if best < len(parts) - 1 or end < words else ""
        return lead + " ".join(parts[best].split(" ")[start:end]) + tail
    for step in (1, -1):
        while True:
            nxt = last + 1 if step == 1 else first - 1
            if not 0 <= nxt < len(parts):
                break
            cost = count(" " + parts[nxt])
            if used + cost > max_tokens:
                break
            used += cost
            first, last = min(first, nxt), max(last, nxt)
    passage = " ".join(parts[first : last + 1])
    if first > 0:
        passage = ELLIPSIS + " " + passage
    if last < len(parts) - 1:
        passage += " " + ELLIPSIS
    return passage


# Words kept before the first matching word of a window, so the match reads in context.
_WINDOW_LEAD = 3


def _best_window(
    sentence: str, weight: Callable[[str], float], *, count: Callable[[str], int], budget: int
) -> tuple[int, int, int] | None:
    """(start, end, number of words) of the longest run of words of a too-long ``sentence``
    that fits ``budget`` tokens, starting just before its word of most ``weight``."""
    words = sentence.split(" ")
    heaviest = max(range(len(words)), key=lambda i: (weight(words[i]), -i))
    start = max(0, heaviest - _WINDOW_LEAD)
    # cl100k splits text before a space, so words joined by single spaces cost the sum of their
    # own counts, each with its leading space: counted per word, these are mostly cache hits.
    used, end = count(words[start]), start + 1
    if used > budget:
        return None
    while end < len(words):
        cost = count(" " + words[end])
        if used + cost > budget:
            break
        used, end = used + cost, end + 1
    return start, end, len(words)
