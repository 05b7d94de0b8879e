"""Token counts and sentence terms cached across compiles: an episode's sentences are the same
from one compile to the next, so its preview is split, tokenized and counted once, when it is
indexed (``preview_warm``), and found cached when a compile builds it.
"""

from __future__ import annotations

from functools import lru_cache

from graph_app.domain.render import sentences
from graph_app.domain.tokenize import tokenize
from memoryproject.tokens import count_tokens


@lru_cache(maxsize=100_000)
def counted_tokens(text: str) -> int:
    return count_tokens(text)


@lru_cache(maxsize=100_000)
def sentence_terms(sentence: str) -> tuple[str, ...]:
    # An episode's sentences are the same from one compile to the next: tokenize them once.
    return tuple(tokenize(sentence))


def preview_warm(line: str, keep: int, tail: int, section: str) -> None:
    """Splits and counts an episode's sentences when it is indexed, so that building its
    preview at compile time finds everything cached instead of paying for it per first query;
    so too the citation a preview starts with (``line[:keep]``, counted before a preview is
    built) and the heading of the item's section."""
    parts = sentences(line[keep : len(line) - tail])
    counted_tokens(" ".join(parts))
    for part in parts:
        sentence_terms(part)
        counted_tokens(part)
        counted_tokens(" " + part)
    counted_tokens(line[:keep])
    counted_tokens(f"## {section}")
    counted_tokens(f"\n## {section}")
