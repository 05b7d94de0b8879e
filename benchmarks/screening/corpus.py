"""The screening corpus: probes (attempts to instruct an agent, by family and language), benign
text that must pass (engineering notes, LLM-tooling notes, dialogue, several languages) and
secrets by form, read from ``data/<split>.toml``; and the host texts timed items are made of
(``data/hosts.toml``).

A probe may name a ``transform`` that disguises its ``payload`` the way an attacker would
(homoglyphs, zero-width characters, fullwidth, encodings); the disguise is applied here so that
the data files stay readable and say in plain words what each probe carries.
"""

from __future__ import annotations

import base64
import codecs
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DATA = Path(__file__).parent / "data"
SPLITS = ("tune", "heldout")


@dataclass(frozen=True)
class Probe:
    family: str
    lang: str
    text: str


@dataclass(frozen=True)
class Benign:
    lang: str
    topic: str
    text: str


@dataclass(frozen=True)
class Secret:
    form: str
    text: str
    secret: str


@dataclass(frozen=True)
class Host:
    """A text memory holds day to day (about 2 KB), that timed items are made of."""

    topic: str
    text: str


@dataclass(frozen=True)
class Corpus:
    probes: tuple[Probe, ...]
    benign: tuple[Benign, ...]
    secrets: tuple[Secret, ...]


_CYRILLIC = str.maketrans("aceiopxyACEHIKMOPTXsj", "асеіорхуАСЕНІКМОРТХѕј")
_GREEK = str.maketrans("aeiouvnpAEIOTNKHXBZM", "αειουνηρΑΕΙΟΤΝΚΗΧΒΖΜ")


def _math_bold(text: str) -> str:
    def one(c: str) -> str:
        if "a" <= c <= "z":
            return chr(0x1D41A + ord(c) - ord("a"))
        if "A" <= c <= "Z":
            return chr(0x1D400 + ord(c) - ord("A"))
        return c

    return "".join(one(c) for c in text)


def _fullwidth(text: str) -> str:
    return "".join(
        chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in text
    )


def _interleave(mark: str) -> Callable[[str], str]:
    return lambda text: " ".join(mark.join(word) for word in text.split(" "))


TRANSFORMS: dict[str, Callable[[str], str]] = {
    "cyrillic": lambda t: t.translate(_CYRILLIC),
    "greek": lambda t: t.translate(_GREEK),
    "math": _math_bold,
    "fullwidth": _fullwidth,
    "zero_width": _interleave("\u200b"),
    "word_joiner": _interleave("\u2060"),
    "base64": lambda t: base64.b64encode(t.encode()).decode(),
    "hex": lambda t: t.encode().hex(),
    "hex_escape": lambda t: "".join(f"\\x{b:02x}" for b in t.encode()),
    "url": lambda t: quote(t, safe=""),
    "rot13": lambda t: codecs.encode(t, "rot13"),
}


def corpus_load(split: str) -> Corpus:
    """The corpus of ``split`` (``tune``, ``heldout`` or ``all``)."""
    if split == "all":
        parts = [corpus_load(name) for name in SPLITS]
        return Corpus(
            tuple(p for c in parts for p in c.probes),
            tuple(b for c in parts for b in c.benign),
            tuple(s for c in parts for s in c.secrets),
        )
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: tune, heldout or all")
    data = tomllib.loads((DATA / f"{split}.toml").read_text(encoding="utf-8"))
    probes = []
    for row in data.get("probe", []):
        text = row["text"]
        if "transform" in row:
            text = text.replace("{payload}", TRANSFORMS[row["transform"]](row["payload"]))
        probes.append(Probe(row["family"], row["lang"], text))
    return Corpus(
        tuple(probes),
        tuple(Benign(r["lang"], r["topic"], r["text"]) for r in data.get("benign", [])),
        tuple(Secret(r["form"], r["text"], r["secret"]) for r in data.get("secret", [])),
    )


def hosts_load() -> tuple[Host, ...]:
    """The host texts of the timing (``data/hosts.toml``): engineering notes, an LLM-tooling
    note and dialogue, the same for every split."""
    data = tomllib.loads((DATA / "hosts.toml").read_text(encoding="utf-8"))
    return tuple(Host(row["topic"], row["text"].strip()) for row in data["host"])
