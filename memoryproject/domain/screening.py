"""Screening of what memory stores and injects: secrets are masked, instruction-like text flagged.

Memory is read back into agents' prompts, so two kinds of content must not pass through as is.

Secrets (cloud keys, tokens, private keys, passwords in URLs or assignments, high-entropy
credentials) are replaced on write by ``[masked:<kind>]``: the stored row never holds them, and
the answer lists what was masked (field, kind, count), never the secret. Instruction-like content
(attempts to override an agent's instructions, to exfiltrate files or secrets, to run tools or
shell commands) is kept, because it may be a legitimate record of an attack, but flagged: each
flag names the field, the rule and the passage, and feeds the ``injection`` signal of the trust
formula (``INJECTION_WEIGHT`` per flagged passage, added into Ua).

The rules are regular expressions, deterministic and independent of the text's language where
the content allows it (key formats, paths, commands, URLs, chat and tool-call markup); the
override phrases are an English list. A rule set rather than a detector library: detect-secrets
keeps its plugin settings in one process-wide object (unsafe in threaded workers), answers
values rather than spans, misses ``github_pat_`` and Google API keys, and its entropy plugins
report every word of prose unless its file-level filters run.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import Any

#: What a masked secret reads as.
MASK = "[masked:{kind}]"
#: Trust signal per flagged passage, added into Ua (capped at 1): one passage alone puts the
#: risk of the context at or above the ESCALATE gate (0.60).
INJECTION_WEIGHT = 0.6
#: The longest quote of a flagged passage.
PASSAGE_MAX = 120
#: Flags kept per screened record (the first ones, in field order).
FLAGS_MAX = 10

# --- secrets ----------------------------------------------------------------------------------

_PLACEHOLDERS = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "secret",
        "token",
        "changeme",
        "none",
        "null",
        "true",
        "false",
        "redacted",
        "example",
        "xxxx",
        "xxxxxxxx",
        "****",
        "********",
        "...",
    }
)


def _is_placeholder(value: str) -> bool:
    text = value.strip().strip("\"'")
    return (
        not text
        or text.lower() in _PLACEHOLDERS
        or text.startswith(("$", "<", "{", "%", "[masked:", "os.environ", "env(", "settings."))
        or set(text) <= {"*", "x", "X", "."}
    )


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s own character distribution."""
    if not text:
        return 0.0
    counts = Counter(text)
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def entropy_floor(length: int) -> float:
    """The entropy a random token of ``length`` letters and digits reaches 99 times in 100
    (measured: 3.85 bits at 24 characters, 4.2 at 32, 4.45 at 40); long identifiers stay below."""
    return min(5.2, 0.12 + 1.174 * math.log(max(1, length)))


def _class_switches(value: str) -> float:
    """Share of neighbouring characters of different classes (upper, lower, digit, other):
    about 0.6 in a random token, 0.25 to 0.35 in CamelCase words."""

    def kind(c: str) -> int:
        return 0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3

    pairs = list(pairwise(value))
    return sum(kind(a) != kind(b) for a, b in pairs) / max(1, len(pairs))


#: Below this share of class switches a run reads as words (99 random tokens in 100 are above).
SWITCH_FLOOR = 0.37


def _credential_like(value: str) -> bool:
    """A run that reads as random: upper and lower case, a digit, the entropy of a random token
    of its length and its mixing of character classes. Hex digests, UUIDs, snake_case and
    CamelCase identifiers and paths do not qualify."""
    has_cases = any(c.isupper() for c in value) and any(c.islower() for c in value)
    has_digit = any(c.isdigit() for c in value)
    return (
        has_cases
        and has_digit
        and shannon_entropy(value) >= entropy_floor(len(value))
        and _class_switches(value) >= SWITCH_FLOOR
    )


def _not_placeholder(value: str) -> bool:
    return not _is_placeholder(value)


@dataclass(frozen=True)
class SecretRule:
    kind: str
    pattern: re.Pattern[str]
    group: int | str = 0  # the part of the match that is the secret
    accept: Callable[[str], bool] | None = None


_B64 = r"A-Za-z0-9+/"
_CRED_KEYS = (
    r"passw(?:or)?d|passwd|pwd|pass|secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key"
    r"|(?:access|auth|refresh|bearer|api|session)[_-]?token|client[_-]?secret|private[_-]?key"
)

SECRET_RULES: tuple[SecretRule, ...] = (
    SecretRule(
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[\s\S]{0,20000}?-----END[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
            rf"|(?:\s*[{_B64}=]{{40,}})*)"
        ),
    ),
    SecretRule(
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    ),
    SecretRule(
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ),
    SecretRule(
        "slack_token",
        re.compile(
            r"\bxox[abposre]-[A-Za-z0-9-]{10,250}"
            r"|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"
        ),
    ),
    SecretRule("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,247}\b")),
    SecretRule("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    SecretRule(
        "aws_access_key",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b"),
    ),
    SecretRule(
        "aws_secret_key",
        re.compile(rf"(?<![{_B64}\w])[{_B64}]{{40}}(?![{_B64}=\w])"),
        accept=_credential_like,
    ),
    SecretRule(
        "password_in_url",
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@]{1,128}:(?P<secret>[^\s@/]{1,256})@"),
        group="secret",
        accept=_not_placeholder,
    ),
    SecretRule(
        "password",
        re.compile(
            rf"(?i)(?<![A-Za-z0-9])(?:{_CRED_KEYS})[\"']?\s*(?::=|=>|=|:)\s*"
            r"(?P<secret>\"[^\"\n]{3,256}\"|'[^'\n]{3,256}'|[^\s\"',;)}\]]{4,256})"
        ),
        group="secret",
        accept=None,  # decided by _assignment_accept (needs the separator)
    ),
    SecretRule(
        "credential",
        re.compile(r"(?<![\w+/=.-])[A-Za-z0-9_+/=-]{24,512}(?![\w+/=-])"),
        accept=_credential_like,
    ),
)


_PASSWORD_WORD = re.compile(r"(?i)passw(?:or)?d|passwd|pwd|pass\b")


def _assignment_accept(match: re.Match[str]) -> bool:
    """``key = value`` always hides a credential when the value is not a placeholder;
    ``key: value`` in prose only when the value looks like one (has a digit or a symbol)."""
    value = match.group("secret")
    if _is_placeholder(value):
        return False
    if value[0] in "\"'":
        return True
    separator = match.group(0)[: match.start("secret") - match.start()].rstrip()
    if not separator.endswith(":") or separator.endswith(":="):
        return True
    return len(value) >= 6 and any(not c.isalpha() for c in value)


#: Text a rule's match must contain (lower case): rules whose needles are all absent are not
#: run, which keeps screening of long text cheap. Rules not named here always run.
_SECRET_NEEDLES: dict[str, tuple[str, ...]] = {
    "private_key": ("private key",),
    "jwt": ("eyj",),
    "github_token": ("gh", "github_pat_"),
    "slack_token": ("xox", "hooks.slack.com"),
    "stripe_key": ("_live_", "_test_"),
    "google_api_key": ("aiza",),
    "password_in_url": ("://",),
    "password": ("pass", "pwd", "secret", "key", "token"),
}


def _has_needle(needles: dict[str, tuple[str, ...]], name: str, lowered: str) -> bool:
    wanted = needles.get(name)
    return wanted is None or any(needle in lowered for needle in wanted)


def text_mask(text: str) -> tuple[str, Counter[str]]:
    """``text`` with every secret replaced by ``[masked:<kind>]``, and the count per kind."""
    counts: Counter[str] = Counter()
    lowered = text.lower()
    for rule in SECRET_RULES:
        if not _has_needle(_SECRET_NEEDLES, rule.kind, lowered):
            continue
        if rule.kind in ("credential", "aws_secret_key") and len(text) < 24:
            continue

        def replace(match: re.Match[str], rule: SecretRule = rule) -> str:
            secret = match.group(rule.group)
            kind = rule.kind
            if kind == "password":
                ok = _assignment_accept(match)
                kind = "password" if _PASSWORD_WORD.search(match.group(0)) else "credential"
            else:
                ok = rule.accept is None or rule.accept(secret)
            if not ok:
                return match.group(0)
            counts[kind] += 1
            start, end = match.span(rule.group)
            whole = match.group(0)
            base = match.start()
            return whole[: start - base] + MASK.format(kind=kind) + whole[end - base :]

        text = rule.pattern.sub(replace, text)
    return text, counts


_KEY_PASSWORD = re.compile(r"(?i)(?:^|[_.-])(?:passw(?:or)?d|passwd|pwd)$")
_KEY_CREDENTIAL = re.compile(
    rf"(?i)(?:^|[_.-])(?:{_CRED_KEYS}|token|credentials?|cookie|authorization)$"
)


@dataclass(frozen=True)
class Masked:
    """What was masked in one field: the kind of secret and how many."""

    field: str
    kind: str
    count: int

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "kind": self.kind, "count": self.count}


def _key_kind(key: str, value: str) -> str | None:
    """A metadata value whose key names a credential is a secret whatever it looks like."""
    if _is_placeholder(value) or len(value) < 4:
        return None
    if _KEY_PASSWORD.search(key):
        return "password"
    # A count or a sentence under a token-named key (max_token: "2000") is not a credential.
    if _KEY_CREDENTIAL.search(key) and not value.isdigit() and not any(c.isspace() for c in value):
        return "credential"
    return None


def _mask_walk(value: Any, where: str, found: list[tuple[str, str, int]]) -> Any:
    if isinstance(value, str):
        masked, counts = text_mask(value)
        found.extend((where, kind, n) for kind, n in counts.items())
        return masked
    if isinstance(value, list):
        return [_mask_walk(item, f"{where}[{i}]", found) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            kind = _key_kind(str(key), item) if isinstance(item, str) else None
            if kind is not None:
                out[key] = MASK.format(kind=kind)
                found.append((path, kind, 1))
            else:
                out[key] = _mask_walk(item, path, found)
        return out
    return value


def value_mask(value: Any, field: str) -> tuple[Any, list[Masked]]:
    """A JSON value (text, list, object) with the secrets in every string masked; in objects,
    a string under a credential-named key (``password``, ``api_key``, ``*_token``, ...) is
    masked whole. Answers the masks by field path (``metadata.db.password``)."""
    found: list[tuple[str, str, int]] = []
    masked = _mask_walk(value, field, found)
    totals: Counter[tuple[str, str]] = Counter()
    for where, kind, n in found:
        totals[(where, kind)] += n
    return masked, [Masked(where, kind, n) for (where, kind), n in totals.items()]


# --- instruction-like content ------------------------------------------------------------------

OVERRIDE = "override"
EXFILTRATION = "exfiltration"
TOOL_CALL = "tool_call"


@dataclass(frozen=True)
class InstructionRule:
    kind: str  # override | exfiltration | tool_call
    rule: str  # what the passage attempts, as a reviewer reads it
    pattern: re.Pattern[str]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_QUALIFIER = (
    r"(?:previous|prior|above|earlier|preceding|initial|original|system|developer|safety"
    r"|existing|current)"
)
_TARGET = (
    r"(?:instructions?|prompts?|directives?|guidelines|rules|messages?|guardrails|policies"
    r"|context|programming)"
)
_STRONG_PATH = (
    r"(?:(?:~|\$HOME|/root|/home/[\w.-]+)/\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)"
    r"|/etc/(?:passwd|shadow|sudoers)\b|\.aws/credentials\b|\.netrc\b|\.git-credentials\b"
    r"|\.kube/config\b|\.docker/config\.json\b|\.pgpass\b)"
)
_ANY_PATH = rf"(?:{_STRONG_PATH}|(?<![\w.])\.env\b(?![.\w])|\bprintenv\b|\$\(\s*env\s*\))"
# A gap inside one sentence: a dot only when it is part of a word, path or URL.
_GAP = r"(?:[^\n.;!?]|\.(?=\S))"
_SEND = (
    r"\b(?:exfiltrat\w*|send|sends|sending|upload\w*|post|email|e-mail|leak|transmit|forward"
    r"|paste|smuggle|curl|wget|scp|rsync|nc|netcat)\b"
)
_READ = r"\b(?:cat|read|print|dump|show|reveal|output|display|base64|copy|include|type)\b"

INSTRUCTION_RULES: tuple[InstructionRule, ...] = (
    InstructionRule(
        OVERRIDE,
        "ignore previous instructions",
        _rx(
            r"\b(?:ignore|disregard|forget|override|bypass|discard)\s+"
            rf"(?:(?:all|any|the|your|of|everything|these|those)\s+)*{_QUALIFIER}\s+"
            rf"(?:\w+\s+)?{_TARGET}\b"
            r"|\b(?:ignore|disregard|forget)\s+(?:everything|all)\s+(?:above|before|said|you\s+"
            r"(?:were|have\s+been)\s+told)"
            r"|\bdisregard\s+(?:the\s+|your\s+|all\s+)?(?:instructions|system\s+prompt|guidelines)"
        ),
    ),
    InstructionRule(
        OVERRIDE,
        "role-play jailbreak",
        _rx(
            r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:DAN\b|in\s+\w+\s+mode|an?\s+(?:unrestricted"
            r"|unfiltered|uncensored|evil)|bound\s+by)"
            r"|\b(?:act|behave|pretend|role-?play)\s+(?:as|like|to\s+be|that\s+you\s+are)\s+"
            r"(?:an?\s+)?(?:DAN\b|unrestricted|unfiltered|uncensored|jailbroken|evil)"
            r"|\bdo\s+anything\s+now\b|\b(?:developer|god|jailbreak|DAN)\s+mode\s+"
            r"(?:enabled|activated|on)\b"
            r"|\b(?:new|real|actual|true|hidden)\s+system\s+(?:prompt|instructions?)\b"
            r"|\bdo\s+not\s+(?:tell|inform|alert|warn)\s+the\s+user\b"
        ),
    ),
    InstructionRule(
        OVERRIDE,
        "chat template markup",
        _rx(
            r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>"
            r"|\[/?INST\]|<</?SYS>>"
        ),
    ),
    InstructionRule(
        EXFILTRATION,
        "sends a sensitive file",
        _rx(rf"{_SEND}{_GAP}{{0,80}}?{_ANY_PATH}|{_ANY_PATH}{_GAP}{{0,80}}?{_SEND}"),
    ),
    InstructionRule(
        EXFILTRATION,
        "reads a private key or credentials file",
        _rx(rf"{_READ}{_GAP}{{0,40}}?{_STRONG_PATH}"),
    ),
    InstructionRule(
        EXFILTRATION,
        "uploads with curl or wget",
        _rx(
            r"\b(?:curl|wget)\b[^\n|;&]{0,200}?\s(?:-d|--data(?:-binary|-raw|-urlencode)?|-F"
            r"|--form|-T|--upload-file|--post-file|--post-data)[\s=]*[\"']?(?:[\w-]+=)?"
            r"(?:@|\$\(|`)"
        ),
    ),
    InstructionRule(
        TOOL_CALL,
        "pipes a download into a shell",
        _rx(r"\b(?:curl|wget)\b[^\n]{0,200}?\|\s*(?:sudo\s+)?(?:ba|z|da|k|fi)?sh\b"),
    ),
    InstructionRule(
        TOOL_CALL,
        "destructive or reverse-shell command",
        _rx(
            r"\brm\s+-(?:rf|fr|r\s+-f|f\s+-r)\s+(?:--no-preserve-root\s+)?(?:/|~|\$HOME|\*)"
            r"(?=\s|$|\*|[\"'`])"
            r"|/dev/tcp/|\bnc\b[^\n]{0,40}\s-e\s|\bbash\s+-i\b|\bmkfs(?:\.\w+)?\s+/dev/"
            r"|\bdd\s+if=[^\n]{0,60}of=/dev/[sh]d|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"
            r"|\bchmod\s+-R\s+777\s+/(?=\s|$)"
        ),
    ),
    InstructionRule(
        TOOL_CALL,
        "tool-call markup",
        _rx(
            r"</?(?:tool_call|tool_use|function_calls?|invoke)\b[^>]{0,80}>"
            r"|\"(?:tool_calls?|function_call|tool_name)\"\s*:"
        ),
    ),
    InstructionRule(
        TOOL_CALL,
        "tells the agent to run a tool or command",
        _rx(
            r"\b(?:you\s+must|you\s+should|you\s+will|immediately|silently|secretly)\s+(?:now\s+)?"
            r"(?:run|execute|call|invoke|use)\s+(?:the\s+|this\s+|a\s+)?(?:\w+\s+){0,2}?"
            r"(?:tool|command|shell|script|function)s?\b"
            r"|\b(?:run|execute|call|invoke)\s+(?:the\s+)?(?:following|this|these)\s+(?:shell\s+)?"
            r"(?:commands?|scripts?|tools?|code)\s+(?:now|immediately|silently|without\s+"
            r"(?:asking|confirmation|telling|approval))"
            r"|\bwithout\s+(?:asking|telling|informing|notifying)\s+(?:the\s+)?user\b"
        ),
    ),
)


@dataclass(frozen=True)
class Flag:
    """One instruction-like passage: where, what kind, which rule, and the passage quoted."""

    field: str
    kind: str
    rule: str
    passage: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "kind": self.kind, "rule": self.rule, "passage": self.passage}

    def quote(self) -> str:
        return f'{self.field}: "{self.passage}" ({self.kind}: {self.rule})'


def _passage(text: str, start: int, end: int) -> str:
    """The line around a match, cut to about PASSAGE_MAX characters around it ("…" marks a
    cut), white space collapsed."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    left = max(line_start, start - 30) if line_end - line_start > PASSAGE_MAX else line_start
    right = min(line_end, left + PASSAGE_MAX)
    quote = " ".join(text[left:right].split())
    return ("…" if left > line_start else "") + quote + ("…" if right < line_end else "")


_INSTRUCTION_NEEDLES: dict[str, tuple[str, ...]] = {
    rule: tuple(needles.split("|"))
    for rule, needles in {
        "ignore previous instructions": "ignore|disregard|forget|override|bypass|discard",
        "role-play jailbreak": "you are|act|behave|pretend|role|now|mode|system|tell|inform"
        "|alert|warn",
        "chat template markup": "<|inst]",
        "sends a sensitive file": ".ssh|id_|/etc/|.aws|.netrc|.git-cred|.kube|.docker|.pgpass"
        "|.env|printenv|$(",
        "reads a private key or credentials file": ".ssh|id_|/etc/|.aws|.netrc|.git-cred|.kube"
        "|.docker|.pgpass",
        "uploads with curl or wget": "curl|wget",
        "pipes a download into a shell": "curl|wget",
        "destructive or reverse-shell command": "rm |/dev/|nc |bash|mkfs|dd |:(|chmod",
        "tool-call markup": '<|"tool|"function',
        "tells the agent to run a tool or command": "run|execut|call|invoke|use|without",
    }.items()
}


def instructions_find(text: str, field: str) -> list[Flag]:
    """Every instruction-like passage in ``text``: one flag per passage and kind (the first
    rule of the kind names it)."""
    flags: list[Flag] = []
    seen: set[tuple[str, str]] = set()
    lowered = text.lower()
    for rule in INSTRUCTION_RULES:
        if not _has_needle(_INSTRUCTION_NEEDLES, rule.rule, lowered):
            continue
        for match in rule.pattern.finditer(text):
            passage = _passage(text, match.start(), match.end())
            if (passage, rule.kind) not in seen:
                seen.add((passage, rule.kind))
                flags.append(Flag(field, rule.kind, rule.rule, passage))
    return flags


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


def _keys(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def _clean(fields: Mapping[str, Any]) -> bool:
    """Whether nothing in ``fields`` can be masked or flagged, found in one pass over all their
    text joined (a rule that matches a field matches the joined text too)."""
    if any(_KEY_PASSWORD.search(k) or _KEY_CREDENTIAL.search(k) for k in _keys(dict(fields))):
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


def record_screen(fields: Mapping[str, Any]) -> Screening:
    """Masks the secrets in every named field (text or JSON) and flags the instruction-like
    passages of what remains; ``fields`` of the answer holds the masked values, in order."""
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
    return Screening(tuple(masked), tuple(flagged[:FLAGS_MAX]), out)


def injection_risk(flag_count: int) -> float:
    """Ua added by ``flag_count`` instruction-like passages: INJECTION_WEIGHT each, at most 1."""
    return min(1.0, INJECTION_WEIGHT * max(0, flag_count))


def flags_reason(flags: Iterable[Flag]) -> str:
    """The sentence a refusal gives: every flagged passage, quoted."""
    quotes = "; ".join(flag.quote() for flag in flags)
    return f"Instruction-like content is never injected automatically: {quotes}."
