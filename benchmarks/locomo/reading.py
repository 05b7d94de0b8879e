"""What the reader of a compiled context gets, beside what it cites. Pure Python: no Django.

Citation recall counts an evidence turn as found when the context cites it, even when its line
is only a preview of a few tokens. These measures read the delivered markdown instead:

- full evidence: a cited turn is *read whole* when the line that starts with its citation holds
  its whole recorded text. The compiler writes recorded text on one line with its whitespace
  collapsed and the spotlight marks (and their lookalikes) replaced by plain quotes
  (``graph_app.domain.render``, ``memoryproject.domain.spotlight.neutral``), so both sides are
  compared in that form: ``delivered_form`` applies the same neutralisation to the turn's text
  and collapses whitespace on both. A preview (best sentences with ``…``) or a cut line never
  holds the whole text; a turn whose text appears only inside another turn's line is not read.
- answer containment (the DPR has-answer test): the gold answer, SQuAD-normalised (lower case,
  punctuation removed, the articles a/an/the removed, whitespace collapsed), is found as whole
  words in the normalised markdown. Punctuation is ASCII punctuation and every Unicode
  punctuation character (the « mark, the ellipsis, curly quotes), so that a word next to one
  still reads as a word.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Mapping

from memoryproject.domain.spotlight import neutral

# Categories whose answers are stated in the conversation (3's are inferred from it): the
# headline of answer containment.
HEADLINE_CATEGORIES = (1, 2, 4)

_SPACE_RE = re.compile(r"\s+")
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)


def delivered_form(text: str) -> str:
    """``text`` as a compiled line carries it: lookalike marks neutralised, whitespace
    collapsed."""
    return _SPACE_RE.sub(" ", neutral(text)).strip()


def cited_lines(markdown: str, citations: Iterable[str]) -> dict[str, str]:
    """The line of the markdown that starts with each citation (absent when none does)."""
    wanted = set(citations)
    lines: dict[str, str] = {}
    for line in markdown.splitlines():
        head = line.split(" ", 1)[0]
        if head in wanted and head not in lines:
            lines[head] = line
    return lines


def read_whole(line: str | None, text: str) -> bool:
    """Whether a delivered ``line`` holds the whole of the recorded ``text``."""
    if line is None:
        return False
    whole = delivered_form(text)
    return bool(whole) and whole in delivered_form(line)


def whole_turns(
    markdown: str, citation_of: Mapping[str, str], texts: Mapping[str, str]
) -> set[str]:
    """The turns (keys of ``citation_of``: turn -> its citation) whose line in ``markdown``
    holds their whole text (``texts``: turn -> recorded text)."""
    lines = cited_lines(markdown, citation_of.values())
    return {
        turn
        for turn, citation in citation_of.items()
        if read_whole(lines.get(citation), texts.get(turn, ""))
    }


def _punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def squad_normal(text: str) -> str:
    """SQuAD's answer normalisation: lower case, punctuation removed, articles removed,
    whitespace collapsed."""
    lowered = "".join(c for c in str(text).lower() if not _punctuation(c))
    return " ".join(_ARTICLES_RE.sub(" ", lowered).split())


def answer_contained(answer: object, context: str) -> bool:
    """Whether the normalised ``answer`` (a number is read as its text) appears as whole words
    in the normalised ``context``; an answer that normalises to nothing never does."""
    wanted = squad_normal(str(answer))
    return bool(wanted) and f" {wanted} " in f" {squad_normal(context)} "


def evidence_read(
    markdown: str, evidence: Iterable[str], cited: Mapping[str, str], texts: Mapping[str, str]
) -> set[str]:
    """The evidence turns read whole in ``markdown`` (``cited``: turn -> citation of each cited
    turn; an uncited turn is never read)."""
    return whole_turns(markdown, {t: cited[t] for t in evidence if t in cited}, texts)
