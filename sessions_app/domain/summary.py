"""Scoring a session summary by what the next session can act on, not by its length.

A useful hand-over names five elements: the active project, the last decision, the current
output, the open questions and the key files. The scorer looks for each one, first as a labelled
section (``Last decision: ...`` or a ``## Open questions`` heading), then as a strong cue in prose
(a cue word in a sentence that also names something concrete: a path, an identifier, a number).
It then maps the text onto the trust model:

- p  = mean strength of the five elements (labelled 1.0, labelled but thin 0.3, cue 0.6,
  a file path anywhere 0.8 for key files, missing 0);
- Ue = vagueness: filler words, too few concrete specifics per word, repeated phrasing;
- Ua = risk: too short to hand over, and hedging outside the open-questions section, plus the
  ``injection`` signal of instruction-like passages (``memoryproject.domain.screening``: 0.6
  each), which the signals list under ``flagged``.

Everything is deterministic and every component comes back in the signals, so a reviewer can
see why a summary scored as it did. Filler of any length gets a low p and a high Ue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memoryproject.domain.screening import (
    FLAGS_MAX,
    Flag,
    injection_risk,
    instructions_find,
)
from sessions_app.domain.trust import TrustScore, clamp01, trust_score

ELEMENTS = ("active_project", "last_decision", "current_output", "open_questions", "key_files")

LABELLED = 1.0
LABELLED_THIN = 0.3
PATH_ANYWHERE = 0.8
CUE_WITH_SPECIFIC = 0.6
CUE_ONLY = 0.15

MIN_WORDS = 40  # below this a hand-over rarely carries all five elements
WORDS_PER_SPECIFIC = 25  # a concrete hand-over names something specific every ~25 words
VAGUE_SATURATION = 0.08  # 8 % filler words is as vague as it gets

_LABEL_PATTERNS = {
    "active_project": r"(active|current)?\s*(project|repo(sitory)?|codebase|goal|objective|working on|context)",
    "last_decision": r"(last|latest|key|recent)?\s*(decisions?( made)?|decided|we decided|choice|chosen)",
    "current_output": r"(current)?\s*(output|status|progress|state|result(s)?|done|completed|built|deliverables?|what (was|got) (done|built))",
    "open_questions": r"(open)?\s*(questions?|issues|next steps?|to-?dos?|todo|unresolved|blockers?|follow-?ups?|remaining)",
    "key_files": r"(key|important|changed|touched|relevant)?\s*(files?|paths?)( touched| changed)?",
}
_LABEL_RE = {name: re.compile(rf"^{pattern}$") for name, pattern in _LABEL_PATTERNS.items()}

_COLON_LABEL = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?(?:[-*+]\s+)?[*_]{0,2}(?P<label>[A-Za-z][A-Za-z /&-]{1,40}?)[*_]{0,2}"
    r"\s*:[*_]{0,2}\s*(?P<rest>.*)$"
)
_HEADING_LABEL = re.compile(r"^\s{0,3}#{1,6}\s+(?P<label>[^:#]{2,50}?)\s*:?\s*#*\s*$")

_CUES = {
    "active_project": re.compile(
        r"\b(working on|work on|the project|project|repo(sitory)?|codebase|service|app)\b", re.I
    ),
    "last_decision": re.compile(
        r"\b(decided|decision|chose|chosen|agreed|settled on|went with|opted|will use|switched to)\b",
        re.I,
    ),
    "current_output": re.compile(
        r"\b(implemented|built|added|wrote|created|shipped|merged|committed|fixed|passes|passing"
        r"|deployed|output|finished|completed|landed|migrated)\b",
        re.I,
    ),
    "open_questions": re.compile(
        r"\?|\b(open question|unresolved|todo|to do|next step|not yet|pending|blocked"
        r"|needs? to decide|remains? to|still need)\b",
        re.I,
    ),
}

_FILE_PATH = re.compile(
    r"(?<![\w@])(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx|go|rs|java|kt|rb|php"
    r"|c|h|cc|cpp|hpp|cs|swift|md|rst|txt|json|ya?ml|toml|ini|cfg|conf|sql|html|css|scss|sh"
    r"|lock|env|xml|csv|ipynb|tf|proto)\b"
)
_SPECIFIC = re.compile(
    r"`[^`\n]+`"  # code span
    r"|https?://\S+"
    r"|#\d+\b"  # issue or PR reference
    r"|\b\d+(?:[.,:]\d+)*%?"  # numbers, versions, times
    r"|\b[a-z][a-z0-9]*_[a-z0-9_]+\b"  # snake_case
    r"|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b"  # camelCase / CamelCase
    r"|\b\w+\.\w+(?:\.\w+)*(?:\(\))?"  # dotted names and calls
    r"|\b[A-Z]{2,}[A-Z0-9]*\b"  # acronyms, constants
    r"|/v\d+/\S+|--[a-z][\w-]+"  # routes, flags
)
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_'./-]*")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")

_VAGUE = re.compile(
    r"\b(stuff|things?|something|somewhat|various|etc|misc|miscellaneous|general(ly)?|basically"
    r"|whatever|a lot|lots of|kind of|sort of|and so on|bits|anyway|okay|ok|fine|good|nice"
    r"|great|some progress|more or less|lorem|ipsum|dolor|blah|stuff like that|as usual|usual)\b",
    re.I,
)
_HEDGE = re.compile(
    r"\b(maybe|probably|might|perhaps|possibly|i think|i guess|not sure|seems?|hopefully"
    r"|somehow|unclear|tbd)\b|\?\?+",
    re.I,
)


@dataclass(frozen=True)
class ElementFinding:
    strength: float
    evidence: str  # labelled | labelled_thin | path | cue | cue_without_specifics | missing

    def as_dict(self) -> dict[str, Any]:
        return {"score": round(self.strength, 4), "evidence": self.evidence}


@dataclass(frozen=True)
class SummaryScore:
    score: TrustScore
    elements: dict[str, ElementFinding]
    words: int
    specifics: int
    vague_terms: int
    hedges: int
    repetition: float
    vagueness: float
    unspecific: float
    too_short: float
    hedging: float
    sections: dict[str, Any] = field(default_factory=dict)
    flagged: tuple[Flag, ...] = ()

    def signals(self) -> dict[str, Any]:
        flagged = {"flagged": [f.as_dict() for f in self.flagged]} if self.flagged else {}
        return {
            **self.score.signals(),
            "elements": {name: finding.as_dict() for name, finding in self.elements.items()},
            "words": self.words,
            "specifics": self.specifics,
            "vague_terms": self.vague_terms,
            "hedges": self.hedges,
            "components": {
                "vagueness": round(self.vagueness, 4),
                "unspecific": round(self.unspecific, 4),
                "repetition": round(self.repetition, 4),
                "too_short": round(self.too_short, 4),
                "hedging": round(self.hedging, 4),
            },
            **flagged,
        }


def _normalise_label(label: str) -> str:
    return " ".join(re.sub(r"[*_`]", "", label).lower().replace("-", " ").split())


def _label_element(label: str) -> str | None:
    norm = _normalise_label(label)
    for name, regex in _LABEL_RE.items():
        if regex.match(norm):
            return name
    return None


def sections_split(text: str) -> dict[str, str]:
    """Labelled sections by element (the first section of each element wins)."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = _HEADING_LABEL.match(line)
        colon = None if heading else _COLON_LABEL.match(line)
        match = heading or colon
        if match:
            element = _label_element(match.group("label"))
            if element is not None and element not in sections:
                current = element
                sections[current] = []
                rest = match.groupdict().get("rest") or ""
                if rest.strip():
                    sections[current].append(rest.strip())
                continue
            if heading:
                # Any other heading ends the section; a repeated or unknown ``Label: value``
                # line inside a section (``Tests: 42 passing``) is part of its content.
                current = None
                continue
        if current is not None:
            sections[current].append(line.strip())
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _specifics(text: str) -> set[str]:
    found = {m.group(0).lower() for m in _SPECIFIC.finditer(text)}
    found |= {m.group(0).lower() for m in _FILE_PATH.finditer(text)}
    return found


def _is_substantive(section: str) -> bool:
    words = _words(section)
    if not words:
        return False
    vague = len(_VAGUE.findall(section))
    return (len(words) >= 3 or bool(_specifics(section))) and vague / len(words) < 0.3


def _repetition(words: list[str]) -> float:
    """Share of repeated word trigrams: 0 for varied prose, near 1 for copy-pasted filler."""
    lowered = [w.lower() for w in words]
    trigrams = list(zip(lowered, lowered[1:], lowered[2:], strict=False))
    if len(trigrams) < 4:
        return 0.0
    return 1.0 - len(set(trigrams)) / len(trigrams)


def _cue_finding(name: str, sentences: list[str]) -> ElementFinding:
    cue = _CUES[name]
    best = ElementFinding(0.0, "missing")
    for sentence in sentences:
        if cue.search(sentence):
            if _specifics(sentence):
                return ElementFinding(CUE_WITH_SPECIFIC, "cue")
            best = ElementFinding(CUE_ONLY, "cue_without_specifics")
    return best


def _as_list(section: str) -> list[str]:
    items = [re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).strip() for line in section.splitlines()]
    return [item for item in items if item]


def summary_score(text: str) -> SummaryScore:
    """Scores a session summary; see the module docstring for the rules."""
    sections = sections_split(text)
    sentences = [s for s in _SENTENCE_SPLIT.split(text) if s.strip()]
    has_path = bool(_FILE_PATH.search(text))

    elements: dict[str, ElementFinding] = {}
    for name in ELEMENTS:
        section = sections.get(name)
        if section is not None and _is_substantive(section):
            elements[name] = ElementFinding(LABELLED, "labelled")
        elif name == "key_files" and has_path:
            elements[name] = ElementFinding(PATH_ANYWHERE, "path")
        elif section is not None:
            elements[name] = ElementFinding(LABELLED_THIN, "labelled_thin")
        elif name == "key_files":
            elements[name] = ElementFinding(0.0, "missing")
        else:
            elements[name] = _cue_finding(name, sentences)
    p = sum(f.strength for f in elements.values()) / len(ELEMENTS)

    words = _words(text)
    word_count = len(words)
    specifics = _specifics(text)
    vague_terms = len(_VAGUE.findall(text))
    vagueness = clamp01((vague_terms / max(1, word_count)) / VAGUE_SATURATION)
    expected_specifics = max(2.0, word_count / WORDS_PER_SPECIFIC)
    unspecific = clamp01(1.0 - len(specifics) / expected_specifics)
    repetition = _repetition(words)
    ue = clamp01(0.45 * vagueness + 0.35 * unspecific + 0.6 * repetition)

    # Hedging inside the open questions is honest, not risky: count it elsewhere only.
    questions = sections.get("open_questions", "")
    hedged_text = text.replace(questions, " ") if questions else text
    hedges = len(_HEDGE.findall(hedged_text))
    hedging = clamp01(hedges / max(1, len(sentences)))
    too_short = clamp01(1.0 - word_count / MIN_WORDS)
    ua = clamp01(0.6 * too_short + 0.4 * hedging)
    flagged = tuple(instructions_find(text, "summary")[:FLAGS_MAX])

    extracted: dict[str, Any] = {}
    for name in ("active_project", "last_decision", "current_output"):
        if sections.get(name):
            extracted[name] = sections[name]
    for name in ("open_questions", "key_files"):
        if name in sections and _as_list(sections[name]):
            extracted[name] = _as_list(sections[name])
    if "key_files" not in extracted and has_path:
        extracted["key_files"] = sorted({m.group(0) for m in _FILE_PATH.finditer(text)})[:20]

    return SummaryScore(
        score=trust_score(p=p, ue=ue, ua=ua, injection=injection_risk(len(flagged))),
        elements=elements,
        words=word_count,
        specifics=len(specifics),
        vague_terms=vague_terms,
        hedges=hedges,
        repetition=repetition,
        vagueness=vagueness,
        unspecific=unspecific,
        too_short=too_short,
        hedging=hedging,
        sections=extracted,
        flagged=flagged,
    )
