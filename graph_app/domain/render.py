"""How memory items read in a compiled bundle, and what text of them is indexed.

Every line starts with its citation (``[FACT:id]``, ``[ADR:id]``, ...) so an agent can quote the
source of anything it uses. Lines are compact (one line per item, whitespace collapsed, dates
as YYYY-MM-DD) so more items fit a budget. Pure Python: no Django import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

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


def one_line(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip()


def day(value: datetime | None) -> str:
    return value.date().isoformat() if value is not None else "?"


def episode_tag(category: str) -> str:
    return EPISODE_TAGS.get(category, category.upper() or "EPISODE")


def fact_citation(fact_id: str) -> str:
    return f"[FACT:{fact_id}]"


def episode_citation(episode_id: str, category: str) -> str:
    return f"[{episode_tag(category)}:{episode_id}]"


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
) -> tuple[str, int]:
    """(line, length of the part that is never truncated)."""
    head = f"{fact_citation(fact_id)} {subject} --({predicate})--> "
    when = f"valid_from={day(valid_from)}"
    if valid_until is not None:
        when += f", valid_until={day(valid_until)}, {status}"
    if source_episode:
        when += f", src={source_episode}"
    return f"{head}{one_line(object_value)} ({when}) @sha256:{sha256[:8]}", len(head)


def episode_line(
    *,
    episode_id: str,
    category: str,
    title: str,
    content: str,
    occurred_at: datetime | None,
    files: Sequence[str],
) -> tuple[str, int]:
    """(line, length of the part that is never truncated: citation, title, date, files).
    ``occurred_at`` None leaves the date out (when a section heading already gives the day)."""
    head = f"{episode_citation(episode_id, category)} {one_line(title)}"
    if occurred_at is not None:
        head += f" ({day(occurred_at)})"
    if files:
        head += f" | files: {', '.join(files)}"
    head += " | "
    return head + one_line(content), len(head)


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
        parts.append(occurred_at.strftime("%B %Y"))
    return " ".join(p for p in parts if p)
