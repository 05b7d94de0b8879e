"""Code-aware tokenizer for retrieval over engineering memory and prose.

Engineering memory mixes prose with identifiers (``order_repository``, ``PaymentLedger``,
``auth.tokens.verify``, ``src/billing/ledger.py``). A query may name the whole identifier or
only one of its words, so an identifier yields its whole lower-cased form (unstemmed, for exact
matches) plus each of its parts treated as prose. Prose words are lower-cased, stop words are
dropped and the rest are stemmed with the Snowball English stemmer (PyStemmer's C build of it,
which snowballstemmer hands out when it is installed), so "payments" meets "payment". What a
query drops beyond stop words is its profile's choice (``profiles.py``): code questions keep
"kind", "type", "times"; chat questions lose them. Dates named in a query become
ISO day and month terms, the terms items are indexed with for the day they occurred, and month
names are English whatever the process locale. Pure Python: no Django import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from functools import lru_cache

import snowballstemmer

# A run of word characters, optionally joined by the separators found inside identifiers,
# dotted names, paths, dates and times. A trailing separator (end of a sentence) is not part.
_WORD_RE = re.compile(r"[A-Za-z0-9_]+(?:[./\-:#][A-Za-z0-9_]+)*")
_SEPARATORS_RE = re.compile(r"[./\-:#_]+")
# CamelCase / PascalCase / acronym boundaries: HTTPServer -> HTTP, Server; v4Public -> v, 4, Public.
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

STOP_WORDS: frozenset[str] = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "cannot",
        "could",
        "couldn",
        "d",
        "did",
        "didn",
        "do",
        "does",
        "doesn",
        "doing",
        "don",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn",
        "has",
        "hasn",
        "have",
        "haven",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "isn",
        "it",
        "its",
        "itself",
        "just",
        "ll",
        "m",
        "me",
        "might",
        "mightn",
        "more",
        "most",
        "must",
        "mustn",
        "my",
        "myself",
        "needn",
        "no",
        "nor",
        "not",
        "now",
        "o",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "re",
        "s",
        "same",
        "shan",
        "she",
        "should",
        "shouldn",
        "so",
        "some",
        "such",
        "t",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "ve",
        "very",
        "was",
        "wasn",
        "we",
        "were",
        "weren",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "won",
        "would",
        "wouldn",
        "y",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
    ]
)

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Snowball English stem of a lower-case word (cached: the vocabulary is small)."""
    return _stemmer.stemWord(word)


def _prose(word: str) -> str | None:
    lowered = word.lower()
    if lowered in STOP_WORDS:
        return None
    if len(lowered) == 1 and not lowered.isdigit():
        return None
    if lowered.isdigit():
        return lowered
    return stem(lowered)


def split_identifier(identifier: str) -> list[str]:
    """The words inside an identifier: snake_case, CamelCase, dotted names and paths."""
    parts: list[str] = []
    for chunk in _SEPARATORS_RE.split(identifier):
        if chunk:
            parts.extend(_CAMEL_RE.findall(chunk))
    return parts


def _is_identifier(word: str, parts: list[str]) -> bool:
    return len(parts) > 1


@lru_cache(maxsize=500_000)
def _word_tokens(word: str) -> tuple[str, ...]:
    parts = split_identifier(word)
    if not _is_identifier(word, parts):
        single = _prose(word)
        return (single,) if single else ()
    out: list[str] = [word.lower()]
    for part in parts:
        token = _prose(part)
        if token:
            out.append(token)
    return tuple(out)


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``: whole identifiers plus their parts, stemmed prose words."""
    tokens: list[str] = []
    for match in _WORD_RE.finditer(text):
        tokens.extend(_word_tokens(match.group(0)))
    return tokens


def identifiers(text: str) -> set[str]:
    """The whole identifiers (lower-cased) named in ``text``: the terms an exact match boosts."""
    found: set[str] = set()
    for match in _WORD_RE.finditer(text):
        word = match.group(0)
        if _is_identifier(word, split_identifier(word)):
            found.add(word.lower())
    return found


def tokenize_query(text: str, *, drop: frozenset[str] = frozenset()) -> list[str]:
    """Index terms of a query: as ``tokenize``, without the terms in ``drop`` (a query profile's
    words that shape a question rather than say what it is about; kept when nothing else is
    left), plus the ISO terms of the dates it names."""
    tokens = tokenize(text)
    kept = [t for t in tokens if t not in drop] or tokens
    return kept + [t for t in date_terms(text) if t not in kept]


def stems(words: Iterable[str]) -> frozenset[str]:
    """The index terms of plain words, as ``tokenize`` makes them (for a profile's word lists)."""
    return frozenset(stem(w.lower()) for w in words)


# --- dates ---------------------------------------------------------------------------------
# A question may name a day ("on 20 April 2026", "April 20, 2026", "2026-04-20") or a month
# ("in April 2026"). Items are indexed with the ISO day and month they occurred on
# ("2026-04-20", "2026-04"), and such query dates become the same terms, so "what changed on
# 20 April 2026" finds what occurred that day whatever words the item uses. Month names are
# English and spelled out here, never taken from the process locale (``strftime("%B")`` would
# say "März" under a German LC_TIME and the index would no longer match the queries).
MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTHS = {name.lower(): number for number, name in enumerate(MONTH_NAMES, start=1)}
_MONTHS.update({name[:3].lower(): number for number, name in enumerate(MONTH_NAMES, start=1)})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Every written form is read whatever the profile: "20 April 2026", "the 3rd of June 2023",
# "9 November, 2022" (the comma form chat logs use), "April 20, 2026", ISO days, "April 2026".
# A date is unambiguous in any of them, so reading all of them costs a code query nothing.
_DATE_RES = [
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
]


def _match_terms(match: re.Match[str]) -> list[str]:
    parts = match.groupdict()
    month_text = parts["month"].lower()
    month = int(month_text) if month_text.isdigit() else _MONTHS[month_text]
    year = int(parts["year"])
    if not 1 <= month <= 12:
        return []
    terms = [f"{year:04d}-{month:02d}"]
    if parts.get("day"):
        try:
            day = date(year, month, int(parts["day"]))
        except ValueError:
            return []
        terms.insert(0, day.isoformat())
    return terms


def date_terms(text: str) -> list[str]:
    """ISO day and month terms (``2022-11-09``, ``2022-11``) for the dates named in ``text``."""
    found: list[str] = []
    for pattern in _DATE_RES:
        for match in pattern.finditer(text):
            found.extend(t for t in _match_terms(match) if t not in found)
    return found


_SINCE_RE = re.compile(r"\b(?:since|after)\s+(?:the\s+)?(?P<rest>.{4,40})", re.IGNORECASE)


def since_date(text: str) -> date | None:
    """The day a query asks to look from ("what changed since 2026-03-01", "after 1 March
    2026"), or None. A month stands for its first day."""
    for match in _SINCE_RE.finditer(text):
        for term in date_terms(match.group("rest")):
            year, month, *rest = (int(p) for p in term.split("-"))
            return date(year, month, rest[0] if rest else 1)
    return None


def month_words(year: int, month: int) -> str:
    """How an item occurring in that month is indexed in words ("April 2026"), in English
    whatever the process locale."""
    return f"{MONTH_NAMES[month - 1]} {year:04d}"


def occurrence_terms(year: int, month: int, day: int) -> list[str]:
    """The terms an item occurring on that day is indexed with."""
    return [f"{year:04d}-{month:02d}-{day:02d}", f"{year:04d}-{month:02d}"]


def plain_words(text: str) -> list[str]:
    """The lower-cased words of ``text`` made of letters only (no identifiers, no numbers)."""
    return [w.lower() for w in _PLAIN_WORD_RE.findall(text)]


# A word of letters that is not part of an identifier, a path or a number (a full stop after
# it may end a sentence).
_PLAIN_WORD_RE = re.compile(r"(?<![A-Za-z0-9_./\-])[A-Za-z]+(?![A-Za-z0-9_/\-]|\.[A-Za-z0-9_])")


def query_words(text: str) -> list[str]:
    """The whole words and identifiers of ``text``, lower-cased, unstemmed, in order: what a
    query may name an entity by."""
    return [match.group(0).lower() for match in _WORD_RE.finditer(text)]
