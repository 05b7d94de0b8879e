"""Secrets in what memory stores: found in the normalised text, masked in the text as written.

Every secret is replaced by ``[masked:<kind>]``; the answer lists what was masked (field, kind,
count), never the secret. Secrets are looked for in the normalised view of the text
(``screening_normalize.normalised``: NFKC, zero-width and other invisible characters dropped),
so a token split by a zero-width space is found whole, and the match maps back to the original
characters, which are what the mask replaces.

Provider token formats come from detect-secrets: its regex-based plugins keep their patterns in
a class attribute (``denylist``) that is read here, and nothing else of the library is called.
Its scanning entry points (``scan_line``, ``analyze_line``) read the process-wide settings object
and may verify a token over the network, and ``transient_settings`` swaps that global object
for the length of a ``with`` block, which threads serving other requests would see; reading the
compiled patterns needs no settings, is thread-safe and answers spans. Its pure heuristics
(sequential strings, templated values) filter placeholders. The formats it lacks or matches too
loosely (``github_pat_``, Google API keys, Vault, DigitalOcean, passwords in prose and on
command lines) are rules of ours, as is the entropy test: detect-secrets' entropy plugins report
every word of prose unless its file-level filters run.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any

from memoryproject.domain import screening_normalize
from memoryproject.domain.screening_needles import NeedleSet
from memoryproject.domain.screening_normalize import base64_text, marked, marks, normalised
from memoryproject.domain.screening_providers import (
    PROVIDER_NEEDLES,
    detect_secrets_import,
    provider_patterns,
)

#: What a masked secret reads as.
MASK = "[masked:{kind}]"

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
    # detect-secrets is imported once a text holds a candidate secret (see ``secret_rules``).
    heuristic = detect_secrets_import("filters.heuristic")

    text = value.strip().strip("\"'")
    return (
        not text
        or text.lower() in _PLACEHOLDERS
        or text.startswith(("$", "<", "{", "%", "[masked:", "os.environ", "env(", "settings."))
        or set(text) <= {"*", "x", "X", "."}
        or heuristic.is_templated_secret(text)
        or (len(text) >= 8 and heuristic.is_sequential_string(text))
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
    CamelCase identifiers and paths do not qualify, nor base64 of readable text (that is a
    message, screened for instructions, not a key)."""
    has_cases = any(c.isupper() for c in value) and any(c.islower() for c in value)
    has_digit = any(c.isdigit() for c in value)
    return (
        has_cases
        and has_digit
        and shannon_entropy(value) >= entropy_floor(len(value))
        and _class_switches(value) >= SWITCH_FLOOR
        and base64_text(value) is None
    )


def _not_placeholder(value: str) -> bool:
    return not _is_placeholder(value)


@dataclass(frozen=True)
class SecretRule:
    kind: str
    pattern: re.Pattern[str]
    group: int | str = 0  # the part of the match that is the secret
    accept: Callable[[str], bool] | None = None
    #: Lower-case text one of which a match holds (else the kind's needles, if any).
    needles: tuple[str, ...] = ()
    #: Every match starts at one of the needles: the pattern is tried there only.
    anchored: bool = False
    #: A match preceded by one of these characters is part of a longer word and skipped
    #: (checked here rather than by a lookbehind, which would slow the scan of the pattern).
    not_after: str = ""


_B64 = r"A-Za-z0-9+/"
_AWS_PREFIXES = "AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA"
_CRED_KEYS = (
    r"passw(?:or)?d|passwd|pwd|pw|pass|passphrase|passcode|secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key"
    r"|(?:access|auth|refresh|bearer|api|session)[_-]?token|client[_-]?secret|private[_-]?key"
)

_CLI_SECRET = r"(?P<secret>'[^'\n]{3,128}'|\"[^\"\n]{3,128}\"|[^\s'\"-][^\s'\"]{2,127})"
_PROSE_PASSWORD = (
    r"(?:password|passwort|passphrase|passcode|passwd|pw|pwd|mot\s+de\s+passe|contraseña"
    r"|senha|palavra-passe|parola\s+d'ordine|пароль|密码|密碼|パスワード|비밀번호)"
)
_PROSE_IS = (
    r"(?:(?:is|was|ist|war|est|était|es|era|é|è|lautet|:|：|是|は|는|은|—|-)\s*"
    r"(?:now\s+|still\s+|set\s+to\s+|jetzt\s+|maintenant\s+|ahora\s+|agora\s+|ora\s+)?"
    r"|(?:set\s+to|changed\s+to|reset\s+to|=)\s*)"
)


def _prose_accept(value: str) -> bool:
    """A word said to be a password is one when it is quoted or does not read as a word: a
    digit, a symbol or a change of case (``the password is stored in vault`` is not one)."""
    if _is_placeholder(value):
        return False
    if value[0] in "\"'`":
        return True
    inner = value[1:]
    return any(not c.isalpha() for c in value) or any(c.isupper() for c in inner)


def _provider_rules() -> tuple[SecretRule, ...]:
    """detect-secrets' provider token formats, bounded so that a token is not found inside a
    longer word."""
    return tuple(
        SecretRule(
            kind,
            re.compile(rf"(?:{pattern})(?![\w-])"),
            needles=PROVIDER_NEEDLES.get(kind, ()),
            not_after=_WORD,
        )
        for kind, pattern in provider_patterns()
    )


_WORD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


def _cli_password(pattern: str, needle: str, not_after: str) -> SecretRule:
    """A password given as a command-line argument: ``pattern`` finds it (group ``secret``) in
    text that holds ``needle``, not right after a character of ``not_after``."""
    return SecretRule(
        "password",
        re.compile(pattern),
        group="secret",
        accept=_not_placeholder,
        needles=(needle,),
        anchored=True,
        not_after=not_after,
    )


# The rules tried before detect-secrets' provider formats, then those tried after them.
_RULES_FIRST: tuple[SecretRule, ...] = (
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
        needles=("gh", "github_pat_"),
        anchored=True,
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
        re.compile(rf"\b(?:{_AWS_PREFIXES})[A-Z0-9]{{16}}\b"),
        needles=tuple(_AWS_PREFIXES.lower().split("|")),
        anchored=True,
    ),
    SecretRule(
        "aws_secret_key",
        re.compile(rf"(?<![{_B64}\w])[{_B64}]{{40}}(?![{_B64}=\w])"),
        accept=_credential_like,
    ),
    SecretRule("vault_token", re.compile(r"\bhv[sbr]\.[A-Za-z0-9_-]{24,255}(?![\w-])")),
    SecretRule("digitalocean_token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b")),
    SecretRule("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
)
_RULES_LAST: tuple[SecretRule, ...] = (
    SecretRule(
        "password_in_url",
        # the user may be empty (redis://:secret@host)
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@]{0,128}:(?P<secret>[^\s@/]{1,256})@"),
        group="secret",
        accept=_not_placeholder,
    ),
    # a password given on a command line: mysql -pSECRET
    _cli_password(
        rf"(?i)mysql(?:dump|admin|sh)?\b[^\n|;&]{{0,200}}?\s-p{_CLI_SECRET}", "mysql", _WORD[:-2]
    ),
    # --password=, gpg --passphrase
    _cli_password(rf"(?i)--(?:password|passphrase|passwd)(?:=|\s+){_CLI_SECRET}", "--pass", _WORD),
    SecretRule(
        "password",
        # a password told in prose, in the languages memory is written in
        re.compile(
            rf"(?i)(?<![\w-])(?:{_PROSE_PASSWORD})\s*(?:{_PROSE_IS})\s*"
            r"(?P<secret>'[^'\n]{3,128}'|\"[^\"\n]{3,128}\"|`[^`\n]{3,128}`"
            r"|[^\s'\"`]{4,128}?)(?=[.,;:!?)]*(?:\s|$))"
        ),
        group="secret",
        accept=_prose_accept,
        anchored=True,
        needles=(
            "passw",
            "passphrase",
            "passcode",
            "pw",
            "mot de passe",
            "contraseña",
            "senha",
            "palavra-passe",
            "parola",
            "пароль",
            "密码",
            "密碼",
            "パスワード",
            "비밀번호",
        ),
    ),
    SecretRule(
        "password",
        re.compile(
            rf"(?i)(?<![A-Za-z0-9])(?:{_CRED_KEYS})[\"']?\s*(?::=|=>|=|:)\s*"
            r"(?P<secret>\"[^\"\n]{3,256}\"|'[^'\n]{3,256}'|[^\s\"',;)}\]]{4,256})"
        ),
        group="secret",
        accept=None,  # decided by _assignment_accept (needs the separator)
        needles=(
            "pass",
            "pw",
            "secret",
            "api",
            "access",
            "auth",
            "refresh",
            "bearer",
            "session",
            "client",
            "private",
        ),
        anchored=True,
    ),
    SecretRule(
        "credential",
        re.compile(r"(?<![\w+/=.-])[A-Za-z0-9_+/=-]{24,512}(?![\w+/=-])"),
        accept=_credential_like,
    ),
)


_PASSWORD_WORD = re.compile(r"(?i)passw(?:or)?d|passwd|pwd|pw\b|pass\b|passphrase|passcode")


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
    "password": (
        "pass",
        "pw",
        "secret",
        "key",
        "token",
        "mot de",
        "contrase",
        "senha",
        "parola",
        "пароль",
        "密",
        "パスワード",
        "비밀번호",
    ),
    "vault_token": ("hvs.", "hvb.", "hvr."),
    "digitalocean_token": ("_v1_",),
    "npm_token": ("npm_",),
}


#: Every needle of the secret rules, looked for in one pass over a text (``NeedleSet``).
_NEEDLES = NeedleSet()
_NEEDLES.register(n for needles in _SECRET_NEEDLES.values() for n in needles)
_NEEDLES.register(n for rule in (*_RULES_FIRST, *_RULES_LAST) for n in rule.needles)
_NEEDLES.register(n for needles in PROVIDER_NEEDLES.values() for n in needles)


@lru_cache(maxsize=1)
def secret_rules() -> tuple[SecretRule, ...]:
    """Every secret rule, in the order they are tried (the first to claim characters wins).
    detect-secrets' provider formats are read, and the library imported, the first time a text
    is screened for secrets or a server warms its rules."""
    return (*_RULES_FIRST, *_provider_rules(), *_RULES_LAST)


#: Characters of a token (``[A-Za-z0-9_+/=-]``): a run of them is where a key can be.
_RUN_TABLE = marks("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+/=-")
_RUN = re.compile(b"\x00+")
#: The run of token characters every match of a kind holds (its character classes are ASCII
#: ones, so the run is one whatever else the text holds): without such a run the rule is not
#: run, and the scan rules (``credential``, ``aws_secret_key``) read the runs only.
_RUN_MIN = {
    "credential": 24,
    "aws_secret_key": 40,
    "aws_access_key": 20,  # AKIA + 16
    "github_token": 33,  # github_pat_ + 22 (ghp_ + 36 is longer)
    "telegram_token": 35,  # the part after the colon
    "stripe_key": 24,  # sk_live_ + 16
    "google_api_key": 39,  # AIza + 35
    "npm_token": 40,  # npm_ + 36
    "digitalocean_token": 71,  # dop_v1_ + 64
    "vault_token": 24,  # after hvs.
    "discord_token": 27,  # the last part
}
_RUN_SCANNED = frozenset({"credential", "aws_secret_key"})
#: Kinds whose run may hold digits outside ASCII (``\d``): without a run they still run on a
#: text holding such a digit.
_DIGITS = frozenset({"discord_token"})


class _Runs:
    """The runs of token characters of one text, found once (``bytes.translate`` and ``find``
    run in C, where a scan by the patterns tries every position)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._mapped = marked(text, _RUN_TABLE)
        self._has: dict[int, bool] = {}
        self._spans: dict[int, list[tuple[int, int]]] = {}

    def digits(self) -> bool:
        """Whether the text holds a digit outside ASCII."""
        return any(char.isdigit() for char in screening_normalize.wide_chars(self._text))

    def has(self, size: int) -> bool:
        found = self._has.get(size)
        if found is None:
            found = self._has[size] = b"\x00" * size in self._mapped
        return found

    def spans(self, size: int) -> list[tuple[int, int]]:
        """The runs of ``size`` characters or more, each with the character after it (what
        the patterns' lookahead reads)."""
        spans = self._spans.get(size)
        if spans is None:
            spans = []
            mapped, wanted = self._mapped, b"\x00" * size
            at = mapped.find(wanted)
            while at >= 0:
                end = _RUN.match(mapped, at).end()  # type: ignore[union-attr]
                spans.append((at, min(len(mapped), end + 1)))
                at = mapped.find(wanted, end)
            self._spans[size] = spans
        return spans


def text_mask(text: str) -> tuple[str, Counter[str]]:
    """``text`` with every secret replaced by ``[masked:<kind>]``, and the count per kind. The
    secrets are found in the normalised text and replaced where they stand in ``text``."""
    view = normalised(text)
    found = _secret_spans(view.text)
    if not found:
        return text, Counter()
    counts: Counter[str] = Counter()
    pieces: list[str] = []
    last = 0
    for start, end, kind in found:
        first, stop = view.span(start, end)
        pieces.append(text[last:first])
        pieces.append(MASK.format(kind=kind))
        last = stop
        counts[kind] += 1
    pieces.append(text[last:])
    return "".join(pieces), counts


def _matches(
    rule: SecretRule, text: str, lowered: str, places: dict[str, list[int]]
) -> Iterator[re.Match[str]]:
    """The matches of ``rule``: tried only where a needle starts when the rule is anchored
    (and the lowered text keeps the offsets), else scanned for."""
    if not rule.anchored or len(lowered) != len(text):
        yield from rule.pattern.finditer(text)
        return
    starts = _NEEDLES.starts(lowered, places, rule.needles)
    end = -1
    for at in starts:
        if at < end:
            continue
        match = rule.pattern.match(text, at)
        if match is not None:
            end = match.end()
            yield match


def _secret_spans(text: str) -> list[tuple[int, int, str]]:
    """The secrets of ``text`` as (start, end, kind), in order, none overlapping: a rule listed
    earlier wins over a later one for the same characters."""
    lowered = text.lower()
    places = _NEEDLES.places(lowered)
    found: list[tuple[int, int, str]] = []
    runs = _Runs(text)
    for rule in secret_rules():
        needles = rule.needles or _SECRET_NEEDLES.get(rule.kind)
        if needles is not None and not _NEEDLES.holds(lowered, places, needles):
            continue
        run = _RUN_MIN.get(rule.kind)
        if run is not None and not runs.has(run) and not (rule.kind in _DIGITS and runs.digits()):
            continue
        if rule.kind in _RUN_SCANNED:
            assert run is not None
            matches: Iterable[re.Match[str]] = (
                m for lo, hi in runs.spans(run) for m in rule.pattern.finditer(text, lo, hi)
            )
        else:
            matches = _matches(rule, text, lowered, places)
        for match in matches:
            kind = rule.kind
            if rule.not_after and match.start() and text[match.start() - 1] in rule.not_after:
                continue
            if rule.accept is None and kind == "password":
                ok = _assignment_accept(match)
                kind = "password" if _PASSWORD_WORD.search(match.group(0)) else "credential"
            else:
                ok = rule.accept is None or rule.accept(match.group(rule.group))
            start, end = match.span(rule.group)
            if ok and not any(start < e and s < end for s, e, _ in found):
                found.append((start, end, kind))
    return sorted(found)


_KEY_PASSWORD = re.compile(r"(?i)(?:^|[_.-])(?:passw(?:or)?d|passwd|pwd|pw|passphrase|passcode)$")
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
