"""Screening of what memory stores and injects: secrets are masked, instruction-like text flagged.

Memory is read back into agents' prompts, so two kinds of content must not pass through as is.
Secrets (cloud and provider keys, tokens, private keys, passwords in URLs, assignments, prose or
command lines, high-entropy credentials) are replaced on write by ``[masked:<kind>]``: the stored
row never holds them, and the answer lists what was masked (field, kind, count), never the
secret (``screening_secrets``). Instruction-like content (overriding an agent's instructions, a
new persona, exfiltration, chat-template or tool-call markup, notes to the AI reading the text,
commands to run) is kept, because it may be a legitimate record of an attack, but flagged: each
flag names the field, the rule and the passage of the text as written, and feeds the
``injection`` signal of the trust formula (``INJECTION_WEIGHT`` per flagged passage, added into
Ua) (``screening_instructions``, ``screening_languages``).

Both look at the text normalised first (``screening_normalize``): Unicode NFKC, invisible
characters dropped, lookalike letters folded to their TR39 skeleton, leetspeak and ROT13 read
back, encoded runs decoded, markup reduced to its visible text, lines joined. This module is the
one door: it holds the record-level screening and re-exports the names callers use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from memoryproject.domain.screening_instructions import (
    EXFILTRATION,
    OVERRIDE,
    PASSAGE_MAX,
    RULES,
    TOOL_CALL,
    Flag,
    InstructionRule,
    Needles,
    code_spans,
    lowered,
    passage,
)
from memoryproject.domain.screening_languages import LANGUAGE_MARKERS, LANGUAGE_RULES
from memoryproject.domain.screening_normalize import View, views, wide_chars
from memoryproject.domain.screening_secrets import (
    _KEY_CREDENTIAL,
    _KEY_PASSWORD,
    MASK,
    Masked,
    SecretRule,
    _credential_like,
    entropy_floor,
    shannon_entropy,
    text_mask,
    value_mask,
)

__all__ = [
    "EXFILTRATION",
    "FLAGS_MAX",
    "INJECTION_WEIGHT",
    "INSTRUCTION_RULES",
    "MASK",
    "OVERRIDE",
    "PASSAGE_MAX",
    "TOOL_CALL",
    "Flag",
    "InstructionRule",
    "Masked",
    "Screening",
    "SecretRule",
    "_credential_like",
    "entropy_floor",
    "flags_reason",
    "injection_risk",
    "instructions_find",
    "record_screen",
    "shannon_entropy",
    "text_mask",
    "value_flags",
    "value_mask",
]

#: Trust signal per flagged passage, added into Ua (capped at 1): one passage alone puts the
#: risk of the context at or above the ESCALATE gate (0.60).
INJECTION_WEIGHT = 0.6
#: Flags kept per screened record (the first ones, in field order).
FLAGS_MAX = 10

#: Every instruction rule, English first: the first rule of a kind to match names the flag.
INSTRUCTION_RULES: tuple[InstructionRule, ...] = RULES + LANGUAGE_RULES


def _applies(rule: InstructionRule, view: View) -> bool:
    """Whether ``rule`` reads ``view``: English rules read every Latin reading (the visible text
    in place of the raw one, except for markup rules), other languages the scripts as written."""
    if rule.lang != "en":
        return view.reading in ("plain", "unicode")
    if view.reading == "unicode":
        return False
    if rule.markup:
        return view.reading in ("plain", "latin")
    return not view.shadowed


def _languages(view: View, lowered: str) -> frozenset[str]:
    """The languages whose rules may match ``view``: those whose script it holds (Cyrillic,
    Han, kana, Hangul) or whose marker words or letters it holds (the Latin-script ones)."""
    if view.reading not in ("plain", "unicode"):
        return frozenset()
    found = set()
    ascii_only = view.text.isascii()
    if not ascii_only:
        # The scripts are looked for among the text's distinct characters outside ASCII.
        wide = "".join(wide_chars(view.text))
        found = {lang for lang, script in _SCRIPTS.items() if script.search(wide)}
    # A marker word stands between spaces: it is one of the text's words split at spaces.
    words = set(lowered.split(" "))
    letters: set[str] | None = None
    for lang, (marker_words, others, marker_letters) in _MARKERS.items():
        if lang in found:
            continue
        if not marker_words.isdisjoint(words):
            found.add(lang)
        elif (others or marker_letters) and (not ascii_only or "'" in lowered):
            # A marker letter (outside ASCII) is one of the lowered text's distinct letters.
            if marker_letters and letters is None:
                letters = wide_chars(lowered)
            if any(m in lowered for m in others) or not marker_letters.isdisjoint(letters or ()):
                found.add(lang)
    return frozenset(found)


def _marker_split(
    markers: tuple[str, ...],
) -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
    """A language's markers as the words a text split at spaces holds (`` und ``), the other
    markers looked for in the text (``l'``) and its letters outside ASCII (``ä``)."""
    words = [m[1:-1] for m in markers if m[0] == m[-1] == " " and " " not in m[1:-1] and m[1:-1]]
    rest = [m for m in markers if m[1:-1] not in words]
    letters = frozenset(m for m in rest if len(m) == 1 and m > "\x7f")
    return frozenset(words), tuple(m for m in rest if m not in letters), letters


_MARKERS = {lang: _marker_split(markers) for lang, markers in LANGUAGE_MARKERS.items()}


_SCRIPTS = {
    "ru": re.compile(r"[\u0400-\u04ff]"),
    "zh": re.compile(r"[\u4e00-\u9fff]"),
    "ja": re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]"),
    "ko": re.compile(r"[\uac00-\ud7af\u1100-\u11ff]"),
}


def instructions_find(text: str, field: str) -> list[Flag]:
    """Every instruction-like passage in ``text``, in any of its readings: one flag per passage
    and kind (the first rule of the kind names it); the passage is quoted from ``text``."""
    flags: list[Flag] = []
    seen: set[tuple[str, str]] = set()
    code = code_spans(text)
    for view in views(text):
        low = lowered(view.text)
        languages: frozenset[str] | None = None
        found = Needles(low)
        for rule in _applying(view.reading, view.shadowed):
            if rule.lang != "en":
                if languages is None:  # looked for once a rule in another language applies
                    languages = _languages(view, low)
                if rule.lang not in languages:
                    continue
            if not rule.wanted(found):
                continue
            for lo, hi in rule.windows(found):
                for match in rule.pattern.finditer(low, lo, hi):
                    _flag(text, view, rule, match, field, flags, seen, code)
    return flags


@lru_cache(maxsize=64)
def _applying(reading: str, shadowed: bool) -> tuple[InstructionRule, ...]:
    """The rules that read a view of ``reading``, in order."""
    probe = View("", reading=reading, shadowed=shadowed)
    return tuple(rule for rule in INSTRUCTION_RULES if _applies(rule, probe))


def _flag(
    text: str,
    view: View,
    rule: InstructionRule,
    match: re.Match[str],
    field: str,
    flags: list[Flag],
    seen: set[tuple[str, str]],
    code: list[tuple[int, int]],
) -> None:
    start, end = view.span(*match.span())
    # Markup quoted as code is an engineering note describing it, not a turn.
    if rule.markup and any(s <= start and end <= e for s, e in code):
        return
    quote = passage(text, start, end)
    if (quote, rule.kind) not in seen:
        seen.add((quote, rule.kind))
        name = f"{rule.rule} ({view.label})" if view.label else rule.rule
        flags.append(Flag(field, rule.kind, name, quote))


def _strings(value: Any, where: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))


def value_flags(value: Any, field: str) -> list[Flag]:
    """The instruction-like passages in every string of a JSON value, by field path."""
    return [
        flag for where, text in _strings(value, field) for flag in instructions_find(text, where)
    ]


# --- one record -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Screening:
    """What screening did to one record: the masks applied and the passages flagged."""

    masked: tuple[Masked, ...] = ()
    flagged: tuple[Flag, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def injection(self) -> float:
        """The trust signal of the flagged passages (added into Ua)."""
        return injection_risk(len(self.flagged))

    def as_dict(self) -> dict[str, Any]:
        return {
            "masked": [m.as_dict() for m in self.masked],
            "flagged": [f.as_dict() for f in self.flagged],
        }


def all_keys(value: Any) -> Iterable[str]:
    """Every key of every object nested in ``value`` (JSON-like: dicts and lists), as text."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from all_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from all_keys(item)


def _clean(fields: Mapping[str, Any]) -> bool:
    """Whether nothing in ``fields`` can be masked or flagged, found in one pass over all their
    text joined (a rule that matches a field matches the joined text too)."""
    if any(_KEY_PASSWORD.search(k) or _KEY_CREDENTIAL.search(k) for k in all_keys(dict(fields))):
        return False
    joined = "\n".join(text for name, value in fields.items() for _, text in _strings(value, name))
    if len(joined) > _CLEAN_KEPT_CHARS:
        return _text_clean.__wrapped__(joined)
    return _text_clean(joined)


_CLEAN_KEPT_CHARS = 16_384  # longer texts are screened every time, never kept


@lru_cache(maxsize=1024)
def _text_clean(text: str) -> bool:
    """Whether no rule masks or flags anything in ``text``. Kept per text: every plan screens
    the context of the same recent traces again until a new one is recorded."""
    return not text_mask(text)[1] and not instructions_find(text, "")


#: The field a flag names when only the record's fields read together hold the passage (an
#: instruction split between a title and a content, or over several metadata values).
JOINED_FIELD = "record"


def record_screen(fields: Mapping[str, Any]) -> Screening:
    """Masks the secrets in every named field (text or JSON) and flags the instruction-like
    passages of what remains, in each field and, when no field alone holds one, in all the
    record's text read together (field ``record``); ``fields`` of the answer holds the masked
    values, in order."""
    if len(fields) == 1:
        ((name, value),) = fields.items()
        if isinstance(value, str):
            return _text_screen(name, value)
    if _clean(fields):
        return Screening((), (), dict(fields))
    masked: list[Masked] = []
    flagged: list[Flag] = []
    out: dict[str, Any] = {}
    for name, value in fields.items():
        clean, masks = value_mask(value, name)
        out[name] = clean
        masked.extend(masks)
        flagged.extend(value_flags(clean, name))
    if not flagged and len(fields) > 1:
        joined = "\n".join(text for name, value in out.items() for _, text in _strings(value, name))
        flagged.extend(instructions_find(joined, JOINED_FIELD))
    return Screening(tuple(masked), tuple(flagged[:FLAGS_MAX]), out)


def _text_screen(name: str, text: str) -> Screening:
    """``record_screen`` of a record of one text field: the text screened once (masked, then
    flagged), where the clean test and the field would screen it twice."""
    screened = _text_screened if len(text) <= _CLEAN_KEPT_CHARS else _text_screened.__wrapped__
    masked, counts, flags = screened(text)
    return Screening(
        tuple(Masked(name, kind, n) for kind, n in counts),
        tuple(Flag(name, f.kind, f.rule, f.passage) for f in flags[:FLAGS_MAX]),
        {name: masked},
    )


@lru_cache(maxsize=1024)
def _text_screened(text: str) -> tuple[str, tuple[tuple[str, int], ...], tuple[Flag, ...]]:
    """``text`` masked, the count per kind of secret, and the passages flagged in what
    remains (field ""). Kept per text, as ``_text_clean`` is."""
    masked, counts = text_mask(text)
    return masked, tuple(counts.items()), tuple(instructions_find(masked, ""))


def injection_risk(flag_count: int) -> float:
    """Ua added by ``flag_count`` instruction-like passages: INJECTION_WEIGHT each, at most 1."""
    return min(1.0, INJECTION_WEIGHT * max(0, flag_count))


def flags_reason(flags: Iterable[Flag]) -> str:
    """The sentence a refusal gives: every flagged passage, quoted."""
    quotes = "; ".join(flag.quote() for flag in flags)
    return f"Instruction-like content is never injected automatically: {quotes}."
