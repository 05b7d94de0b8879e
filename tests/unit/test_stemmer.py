"""The stemmer the tokenizer uses is PyStemmer's C build of Snowball English, and it stems as
snowballstemmer's own Python build does: an index stored by one process is queried by another,
and a term stemmed differently would never meet its documents."""

from __future__ import annotations

import re
from pathlib import Path

from snowballstemmer.english_stemmer import EnglishStemmer

from graph_app.domain import tokenize

ROOT = Path(__file__).resolve().parents[2]


def _words() -> list[str]:
    """Every lower-case word of the project's own docs and code: thousands of real words,
    identifiers' parts included."""
    words: set[str] = set()
    for path in [*ROOT.glob("docs/*.md"), *ROOT.glob("*/domain/*.py")]:
        words.update(re.findall(r"[a-z]+", path.read_text(encoding="utf-8").lower()))
    return sorted(words)


def test_the_tokenizer_stems_with_the_c_build():
    assert type(tokenize._stemmer).__module__ == "Stemmer"


def test_the_c_build_stems_every_word_as_the_python_build_does():
    words = _words()
    assert len(words) > 3000
    python_build = EnglishStemmer()
    differ = [w for w in words if tokenize.stem(w) != python_build.stemWord(w)]
    assert differ == []
