"""The views screening reads a text through, each mapped back to the text as written.

Rules are written for plain text; attackers write ``ｉｇｎｏｒｅ``, ``іgnоrе`` (Cyrillic),
``ig\u200bnore``, ``1gn0r3``, ``ig<b></b>nore``, base64 or ROT13. Instead of a rule per disguise,
the text is normalised once (NFKC, format and zero-width characters dropped, HTML entities
decoded, the comment or quote marker that continues a sentence on the next line removed, so
that rules read across lines), read as its visible text when it holds markup, folded to its TR39
skeleton for Latin lookalikes (the Unicode confusables table shipped by
``confusable-homoglyphs``), and read again through cheap variants (leetspeak, ROT13) and through
every embedded encoded run (base64, hex, URL-encoded) decoded. Every view keeps, per character,
the offset it came from in the original, so a flag or a mask always points at the original.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from urllib.parse import unquote

from memoryproject.domain.screening_needles import NeedleSet

#: Bytes of decoded text a run may yield; longer runs are read up to this.
DECODED_MAX = 4096
#: Nesting of encodings followed (base64 of hex of ...).
DECODE_DEPTH = 2


@dataclass(frozen=True)
class View:
    """A normalised reading of a text: ``origin[i]`` is the offset in the original text of
    ``text[i]`` (None: the same offsets). ``run`` is the original span of an encoded run the view
    decodes (every match maps to it). ``reading`` says how the text was read: ``plain`` (ASCII
    or nothing to fold), ``latin`` (lookalikes folded) and ``unicode`` (scripts kept) of a
    non-ASCII text, ``visible`` (markup removed), ``leetspeak``, ``rot13``. ``shadowed`` marks a
    view whose ``visible`` reading follows; ``label`` names the disguise for a reviewer."""

    text: str
    origin: tuple[int, ...] | None = None
    run: tuple[int, int] | None = None
    reading: str = "plain"
    shadowed: bool = False
    label: str = ""

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span a match of ``text[start:end]`` comes from."""
        if self.run is not None:
            return self.run
        if self.origin is None:
            return start, end
        if not self.origin:
            return 0, 0
        last = len(self.origin) - 1
        first = self.origin[min(start, last)]
        return first, self.origin[min(max(start, end - 1), last)] + 1


# --- character folding ------------------------------------------------------------------------

# Characters that render as nothing or as a space: zero-width, bidi controls, soft hyphen,
# variation selectors, tag characters (all Cf / Mn-like noise an attacker uses to split words).
_DROP_CATEGORIES = frozenset({"Cf", "Cc"})
_KEEP_CONTROLS = frozenset("\n\t\r")
_WHITESPACE = str.maketrans({"\t": " ", "\r": " ", "\x0b": " ", "\x0c": " "})


_READS_LATIN = {"ε": "e", "η": "n", "κ": "k", "τ": "t", "ω": "w", "ϲ": "c", "ϳ": "j", "ɑ": "a"}


@lru_cache(maxsize=1)
def _latin_skeleton() -> dict[str, str]:
    """Every character TR39 lists as confusable with one ASCII letter or digit, mapped to it.
    ASCII itself stays: only lookalikes from other scripts (and symbol blocks) fold. The table
    is read on first use (its import parses 0.9 MB of JSON, 29 ms): masking secrets, as every
    compile's query is, never folds letters and never reads it."""
    from confusable_homoglyphs import confusables

    table: dict[str, str] = {}
    for char, entries in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        for entry in entries:
            target = entry["c"]
            if len(target) == 1 and target.isascii() and target.isalnum():
                table[char] = target
                break
    # TR39's skeleton of a capital I is "l"; an uppercase lookalike of it reads as I here.
    for char, target in list(table.items()):
        if target == "l" and char.isupper():
            table[char] = "I"
    # Greek letters TR39 does not list as confusable that still read as Latin in a word.
    table.update(_READS_LATIN)
    return table


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    """One character as screening reads it: dropped when invisible, NFKC-decomposed, combining
    marks dropped, the rest kept (Latin lookalikes fold later, in the Latin view)."""
    if char in _KEEP_CONTROLS:
        return " " if char != "\n" else "\n"
    category = unicodedata.category(char)
    if category in _DROP_CATEGORIES or 0xFE00 <= ord(char) <= 0xFE0F:
        return ""
    if category == "Mn":
        return ""
    if category == "Zs":
        return " "
    folded = unicodedata.normalize("NFKC", char)
    if folded != char:
        return "".join(_fold_char(c) if c != char else c for c in folded)
    return char


def _compose(view: View, text: str, origin: tuple[int, ...]) -> View:
    """A view derived from ``view`` whose ``origin`` indexes ``view.text``."""
    if view.origin is not None and origin:
        base = view.origin
        origin = tuple(map(base.__getitem__, origin))
    return replace(view, text=text, origin=origin)


def _spliced(
    view: View,
    pattern: re.Pattern[str],
    pieces: Callable[[re.Match[str]], Iterable[tuple[str, int]]],
) -> View | None:
    """A view of ``view`` with each match of ``pattern`` replaced by what ``pieces(match)``
    gives: texts, each with the offset in ``view.text`` its characters point at (the rest keeps
    its offsets). None when nothing matched."""
    text = view.text
    parts: list[str] = []
    origin: list[int] = []
    last = 0
    for match in pattern.finditer(text):
        start, end = match.span()
        parts.append(text[last:start])
        origin.extend(range(last, start))
        for piece, at in pieces(match):
            parts.append(piece)
            origin.extend([at] * len(piece))
        last = end
    if not parts:
        return None
    parts.append(text[last:])
    origin.extend(range(last, len(text)))
    return _compose(view, "".join(parts), tuple(origin))


def _substitute(
    view: View, pattern: re.Pattern[str], repl: str | Callable[[re.Match[str]], str]
) -> View:
    """``view`` with every match of ``pattern`` replaced by ``repl`` (a text, or a function of
    the match), the offsets kept: inserted characters point at the match's start."""

    def pieces(match: re.Match[str]) -> tuple[tuple[str, int]]:
        return ((repl if isinstance(repl, str) else repl(match), match.start()),)

    spliced = _spliced(view, pattern, pieces)
    return view if spliced is None else spliced


_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# Tags (not their attribute text: a ``title=""`` is screened where it stands), comment
# delimiters, and the line-comment or quote marker that continues a sentence on the next line.
# Every branch starts with a literal character, so the scan skips to the candidates.
_MARKUP = re.compile(r"<!--|-->|</?[A-Za-z][A-Za-z0-9-]{0,20}(?:\s[^<>]{0,200})?/?>|\*\*|__|~~")
# Attributes a reader sees (a tooltip, an image's text) or a model reads as text.
_SHOWN_ATTRIBUTE = re.compile(
    r"\b(?:title|alt|aria-label|placeholder|value|content|label|data-[\w-]+)\s*=\s*"
    r"(?:\"([^\"]*)\"|'([^']*)')",
    re.IGNORECASE,
)


def _visible(match: re.Match[str]) -> str:
    """A tag as its text: nothing, or the attribute values a reader or a model reads."""
    tag = match.group(0)
    if not tag.startswith("<") or "=" not in tag:
        return ""
    shown = [a or b for a, b in _SHOWN_ATTRIBUTE.findall(tag)]
    return f" {' '.join(shown)} " if shown else ""


_LINE_MARKER = re.compile(r"\n[ \t]*(?:#|//|--|;|>|\*|%)")
_LINE_JOIN = re.compile(r"[ \t]*\n[ \t]*(?:(?:#+|//+|--|;+|>+|\*|%)[ \t]+)?")


def unicode_view(text: str) -> View:
    """The text NFKC-normalised, invisible characters dropped, entities decoded and lines
    joined; scripts kept as they are (for rules in other languages)."""
    view = View(text)
    if "&" in text:
        view = _substitute(view, _ENTITY, lambda m: html.unescape(m.group(0)))
    if not view.text.isascii():
        view = _fold(view, keep_space=False)
    if any(c in view.text for c in "\t\r\x0b\x0c"):
        view = replace(view, text=view.text.translate(_WHITESPACE))
    # Lines stay lines (markup rules anchor on them; the others cross them with \s), without
    # the comment or quote marker that continues a sentence on the next line.
    if "\n" in view.text and _LINE_MARKER.search(view.text):
        view = _substitute(view, _LINE_JOIN, "\n")
    return view


def latin_view(view: View) -> View:
    """``view`` with every Latin lookalike folded to its ASCII skeleton (one character to one,
    so the offsets stay)."""
    if view.text.isascii():
        return view
    table = _latin_translation()
    if not any(ord(char) in table for char in wide_chars(view.text)):
        return view  # no lookalike: the text reads as it is written
    # Only the characters outside ASCII fold: translated run by run, which spares the slow
    # path of ``str.translate`` (a table lookup per character) on the ASCII between them.
    text = _NON_ASCII.sub(lambda m: m.group().translate(table), view.text)
    if text == view.text:
        return view  # no lookalike: the text reads as it is written
    return replace(view, text=text, reading="latin")


@lru_cache(maxsize=1)
def _latin_translation() -> dict[int, str]:
    return {ord(k): v for k, v in _latin_skeleton().items()}


_LEET = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"}
)
# A leet character between two letters (``1gn0r3``, ``pr3v10u5``), not a version or a unit.
# Leet characters before a letter; a leet word has a letter on both sides, one of them past f
# (``1gn0r3``, ``pr3v10u5``), which a version, a unit or a hex digest has not.
_LEET_RUN = re.compile(r"[013457@$]+(?=[a-z])")
_LEET_MARKS = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz013457@$", b"a" * 26 + b"1" * 8)
_ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)
# Words an instruction hidden by ROT13 reads as once decoded: without one of them the ROT13
# reading is not worth running the rules on.
_ROT13_GATE = (
    "ignor",
    "instruction",
    "disregard",
    "pretend",
    "forget",
    "unrestricted",
    "system prompt",
    "the user",
    "secret",
    "api key",
    "password",
    "you are",
    "note to",
    "assistant",
    "jailbreak",
    "override",
    "exfiltrat",
    "credential",
    "send ",
    "upload",
)


def leet_view(view: View) -> View | None:
    """``view`` with leetspeak folded (``1gn0r3`` reads ``ignore``), when it has such words."""
    text = view.text.lower()
    # A leet word has a letter right before a leet character ("a1" once marked): most texts
    # have none, and are not scanned for runs.
    if b"a1" not in text.encode("ascii", "replace").translate(_LEET_MARKS):
        return None
    found = 0
    for match in _LEET_RUN.finditer(text):
        start, end = match.span()
        before = text[start - 1] if start else " "
        if "a" <= before <= "z" and (before >= "g" or "g" <= text[end] <= "z"):
            found += 1
            if found >= 2:
                break
    if found < 2:
        return None
    return replace(view, text=view.text.translate(_LEET), reading="leetspeak", label="leetspeak")


# The gate words as ROT13 writes them: an ASCII text is looked at before it is translated.
_ROT13_GATE_WRITTEN = NeedleSet()
_ROT13_GATE_WRITTEN.register(word.translate(_ROT13) for word in _ROT13_GATE)


def rot13_view(view: View) -> View | None:
    """``view`` read through ROT13, when it then holds words of an instruction."""
    # ROT13 and lower case commute on ASCII, and no character outside ASCII but these two
    # lowers to ASCII: the gate reads the text as written, outside ASCII read as "?".
    written = view.text
    if not ("\u0130" in written or "\u212a" in written):
        ascii_text = written if written.isascii() else written.encode("ascii", "replace").decode()
        if not _ROT13_GATE_WRITTEN.occurs(ascii_text.lower()):
            return None
    text = written.translate(_ROT13)
    lowered = text.lower()
    if not any(word in lowered for word in _ROT13_GATE):
        return None
    return replace(view, text=text, reading="rot13", label="rot13")


# --- encoded runs -------------------------------------------------------------------------------

# Greedy from the left, a match always starts where a run starts: no lookbehind needed.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
# Text as hex: every printable ASCII byte starts with a digit from 2 to 7. Each branch starts
# with a character class, so the scan skips to candidates.
_HEX_RUN = re.compile(
    r"[2-7](?:[0-9A-Fa-f][2-7]){7,}[0-9A-Fa-f]|\\x[2-7][0-9A-Fa-f](?:\\x[2-7][0-9A-Fa-f]){5,}"
    r"|[2-7][0-9A-Fa-f](?:[ :][2-7][0-9A-Fa-f]){7,}"
)
_URL_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_TOKEN_EDGE = " \t\n<>\"'"


def _readable(raw: bytes) -> str | None:
    """``raw`` as text when it reads as text: UTF-8, mostly letters and spaces."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 6 or (not text.isprintable() and "\n" not in text):
        return None
    # Commands and URLs are half punctuation; random bytes are rarely valid UTF-8 at all.
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return text if letters >= 0.5 * len(text) and " " in text.strip() else None


def base64_text(run: str) -> str | None:
    """What a base64 run says, when it decodes to readable text."""
    return _base64(run)


def _base64(run: str) -> str | None:
    # Hex digests and identifiers are valid base64 too: they decode to noise and are dropped.
    if run.islower() or run.isupper() or run.isdigit() or len(set(run)) < 8:
        return None
    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _readable(raw[:DECODED_MAX])


def _hex(run: str) -> str | None:
    digits = re.sub(r"\\x|[ :]", "", run)
    if len(digits) % 2:
        digits = digits[:-1]
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        return None
    return _readable(raw[:DECODED_MAX])


def _url(run: str) -> str | None:
    decoded = unquote(run.replace("+", " "))
    return decoded if decoded != run and _readable(decoded.encode()) else None


def _url_runs(text: str) -> Iterator[tuple[int, int]]:
    """The tokens (runs between spaces and quotes) holding three %XX escapes or more."""
    if "%" not in text:
        return
    end = -1
    for match in _URL_ESCAPE.finditer(text):
        if match.start() < end:
            continue
        start = max(text.rfind(c, 0, match.start()) for c in _TOKEN_EDGE) + 1
        stops = [at for at in (text.find(c, match.end()) for c in _TOKEN_EDGE) if at >= 0]
        end = min(stops) if stops else len(text)
        if text.count("%", start, end) >= 3:
            yield start, end


# Runs are found by marking their characters (``str.translate``) and looking for enough marks
# in a row (``str.find``), both in C: the run patterns then read the runs only, where a scan
# by them tries every position of the text.
_MARK, _GAP_MARK = 0, 1


def marks(chars: str, gaps: str = "") -> bytes:
    """A ``bytes.translate`` table marking ``chars`` (ASCII) with _MARK and ``gaps`` with
    _GAP_MARK: runs are then found by ``bytes.find``, both in C."""
    table = bytearray(range(256))
    for char in chars:
        table[ord(char)] = _MARK
    for char in gaps:
        table[ord(char)] = _GAP_MARK
    return bytes(table)


def marked(text: str, table: bytes) -> bytes:
    """``text`` as bytes, one per character (a character outside ASCII reads ``?``, which no
    run holds), translated by ``table``."""
    return text.encode("ascii", "replace").translate(table)


_BASE64_MARKS = marks("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_HEX_MARKS = marks("0123456789ABCDEFabcdef", " :")
_MARKS = re.compile(b"\x00+")
# What a hex run holds at least: 16 digits in a row, or 8 pairs apart by a space or a colon.
_HEX_SIGNS = (b"\x00" * 16, b"\x00\x00" + b"\x01\x00\x00" * 7)


def _base64_runs(text: str) -> Iterator[re.Match[str]]:
    """What ``_BASE64_RUN.finditer(text)`` gives: runs of 16 base64 characters or more (a match
    starts where a run starts and takes it whole, and up to two ``=`` after it)."""
    runs = marked(text, _BASE64_MARKS)
    wanted = b"\x00" * 16
    at = runs.find(wanted)
    while at >= 0:
        end = _MARKS.match(runs, at).end()  # type: ignore[union-attr]
        yield from _BASE64_RUN.finditer(text, at, min(len(text), end + 2))
        at = runs.find(wanted, end)


def _hex_runs(text: str) -> Iterator[re.Match[str]]:
    """What ``_HEX_RUN.finditer(text)`` gives; none is looked for without a sign of one."""
    runs = marked(text, _HEX_MARKS)
    if "\\x" in text or any(sign in runs for sign in _HEX_SIGNS):
        yield from _HEX_RUN.finditer(text)


def decoded_runs(text: str) -> Iterator[tuple[str, tuple[int, int], str]]:
    """Every embedded encoded run that decodes to readable text: (encoding, span, decoded)."""
    for name, runs, decode in _DECODERS:
        for match in runs(text):
            decoded = decode(match.group(0).strip())
            if decoded is not None:
                yield name, match.span(), decoded
    for start, end in _url_runs(text):
        decoded = _url(text[start:end])
        if decoded is not None:
            yield "url", (start, end), decoded


_DECODERS = (("base64", _base64_runs, _base64), ("hex", _hex_runs, _hex))


def views(text: str, depth: int = DECODE_DEPTH) -> Iterator[View]:
    """Every reading of ``text`` the rules run on, the plain one first."""
    base = unicode_view(text)
    latin = latin_view(base)
    visible = None
    if any(mark in latin.text for mark in ("<", "**", "__", "~~")):
        # the visible text: tags and emphasis that split a word or a phrase removed
        visible = _substitute(latin, _MARKUP, _visible)
        visible = None if visible is latin else replace(visible, reading="visible")
    yield replace(latin, shadowed=visible is not None)
    if latin is not base:
        yield replace(base, reading="unicode")
    if visible is not None:
        yield visible
    words = visible or latin
    for disguised in (leet_view(words), rot13_view(words)):
        if disguised is not None:
            yield disguised
    if depth <= 0:
        return
    for name, span, decoded in decoded_runs(text):
        for inner in views(decoded, depth - 1):
            label = f"decoded from {name}" + (f", {inner.label}" if inner.label else "")
            yield replace(inner, origin=None, run=span, label=label)


def normalised(text: str) -> View:
    """The one view secrets are looked for in: invisible characters dropped and NFKC applied
    (a token split by a zero-width space is whole again), no folding of letters."""
    if text.isascii():
        return View(text)
    return _fold(View(text), keep_space=True)


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _fold(view: View, *, keep_space: bool) -> View:
    """``view`` with every character outside ASCII folded (``_fold_char``); ASCII is copied as
    it stands, so a text with a few such characters costs little more than an ASCII one."""
    text = view.text
    # Most texts outside ASCII hold only characters that fold to themselves (dashes, quotes,
    # accented letters): each distinct one is looked at once, and such a text is left as it is.
    if all(_kept(char, keep_space) for char in wide_chars(text)):
        return view
    changed = False

    def pieces(match: re.Match[str]) -> list[tuple[str, int]]:
        nonlocal changed
        folds = []
        for at in range(*match.span()):
            char = text[at]
            folded = char if keep_space and char.isspace() else _fold_char(char)
            changed = changed or folded != char
            folds.append((folded, at))
        return folds

    spliced = _spliced(view, _NON_ASCII, pieces)
    return spliced if changed and spliced is not None else view


@lru_cache(maxsize=4096)
def _kept(char: str, keep_space: bool) -> bool:
    """Whether ``_fold`` leaves ``char`` as it is."""
    return (keep_space and char.isspace()) or _fold_char(char) == char


def wide_chars(text: str) -> set[str]:
    """The distinct characters of ``text`` outside ASCII: found where its ASCII reading holds
    a "?" (``bytes.find``, in C), which costs little for a text mostly in ASCII."""
    if text.isascii():
        return set()
    raw = text.encode("ascii", "replace")  # one byte per character, "?" outside ASCII
    if raw.count(b"?") > _WIDE_SCAN:
        return {char for char in set(text) if char > "\x7f"}
    found = set()
    at = raw.find(b"?")
    while at >= 0:
        found.add(text[at])
        at = raw.find(b"?", at + 1)
    found.discard("?")
    return found


#: Past this many characters outside ASCII (or "?"), a text's distinct characters are
#: collected in one pass instead.
_WIDE_SCAN = 200
