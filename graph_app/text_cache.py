"""Token counts and sentence terms cached across compiles: an episode's sentences are the same
from one compile to the next, so its preview's sentences are split and tokenized once, when it
is indexed (``preview_warm``), and found cached when a compile builds it. What a preview counts
before it is built is kept with the item itself (``IndexItem.preview_tokens``), which a restored
index reads from its snapshot.
"""

from __future__ import annotations

from functools import lru_cache

from graph_app.domain.render import sentences
from graph_app.domain.tokenize import tokenize
from graph_app.domain.working_set import WORKING_SET
from memoryproject.tokens import count_key, count_tokens


@lru_cache(maxsize=WORKING_SET)
def counted_tokens(text: str) -> int:
    """``count_tokens(text)``, cached; a text not seen yet is looked up by its ``count_key``, so
    that texts differing only in their digits (dates, numbered names) are counted once."""
    return _counted(count_key(text))


@lru_cache(maxsize=WORKING_SET)
def _counted(key: str) -> int:
    return count_tokens(key)


@lru_cache(maxsize=WORKING_SET)
def sentence_terms(sentence: str) -> tuple[str, ...]:
    # An episode's sentences are the same from one compile to the next: tokenize them once.
    return tuple(tokenize(sentence))


def preview_warm(line: str, keep: int, tail: int, section: str) -> None:
    """Splits and tokenizes an episode's sentences when it is indexed, so that building its
    preview at compile time finds them cached instead of paying for them per first query; so
    too the heading of the item's section is counted."""
    for part in sentences(line[keep : len(line) - tail]):
        sentence_terms(part)
    counted_tokens(f"## {section}")
    counted_tokens(f"\n## {section}")


def text_caches_clear() -> None:
    """Empties the caches of counts, sentences and terms (as in a new process)."""
    for cache in (counted_tokens, _counted, sentence_terms, sentences):
        cache.cache_clear()
