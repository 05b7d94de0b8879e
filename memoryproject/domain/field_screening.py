"""Screening of every text field a write stores: free text masked, identifiers refused.

A write hands over two kinds of fields. Free fields (titles, content, summaries, names,
aliases, kinds, object values, file paths, models, policies, metadata) are stored masked: every
secret is replaced by ``[masked:<kind>]`` (``record_screen``), in every string of a list and of
a JSON object, and in the object's keys too. Identifiers (entity ids, subjects, predicates,
object entities, external ids, mentioned entities) name a record: masking one would change
what it names, so a secret found there is answered as a refusal (``Screening.refused``, the
field and the kind), and the write must store nothing. Instruction-like passages are flagged in
both kinds, each under its field (an identifier read with its separators as spaces, since
``ignore_all_previous_instructions`` spells the sentence it hides).

Field paths: ``files_touched[1]`` is an item of a list, ``metadata.db.password`` a value of an
object, and a path ending in ``#key`` is the key itself (``metadata.ci.[masked:github_token]#key``:
the entry's key, shown masked, held a GitHub token). Two keys of one object that mask to the
same text are told apart by a ``~2``, ``~3``... suffix.

Pure computation: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryproject.domain.screening import (
    FLAGS_MAX,
    PASSAGE_MAX,
    Flag,
    Masked,
    Screening,
    all_keys,
    instructions_find,
    record_screen,
    text_mask,
)

#: The suffix of a field path that names an object's key rather than its value.
KEY_MARK = "#key"


@dataclass(frozen=True)
class Refusal:
    """A secret in an identifier: the write is refused, naming the field and the rule."""

    field: str
    kind: str

    @property
    def rule(self) -> str:
        return f"must not hold a secret ({self.kind})"


@dataclass(frozen=True)
class WriteScreening:
    """What screening found in one write: the free fields masked (``screening.fields``), what
    was masked and flagged, and the identifiers that hold a secret (the write is refused)."""

    screening: Screening
    refused: tuple[Refusal, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)


def _has_dict(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    return isinstance(value, list) and any(_has_dict(item) for item in value)


def _free(name: str, taken: set[str]) -> str:
    """``name``, or ``name~2``, ``name~3``... when the object already holds it."""
    if name not in taken:
        return name
    n = 2
    while f"{name}~{n}" in taken:
        n += 1
    return f"{name}~{n}"


def _keys_walk(value: Any, where: str, masked: list[Masked], flagged: list[Flag]) -> Any:
    if isinstance(value, list):
        return [_keys_walk(item, f"{where}[{i}]", masked, flagged) for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    given = {str(k) for k in value}
    for key, item in value.items():
        text = str(key)
        clean, counts = text_mask(text)
        if counts:
            clean = _free(clean, (given - {text}) | set(out))
        path = f"{where}.{clean}" if where else clean
        masked.extend(Masked(path + KEY_MARK, kind, n) for kind, n in counts.items())
        flagged.extend(instructions_find(clean, path + KEY_MARK))
        out[clean] = _keys_walk(item, path, masked, flagged)
    return out


def keys_screen(value: Any, where: str) -> tuple[Any, list[Masked], list[Flag]]:
    """``value`` with the secrets in its objects' keys masked, what was masked and the
    instruction-like keys flagged, by field path (``<path>#key``)."""
    if not _has_dict(value):
        return value, [], []
    keys = "\n".join(all_keys(value))
    probe = record_screen({where: keys})
    if not probe.masked and not probe.flagged:
        return value, [], []
    masked: list[Masked] = []
    flagged: list[Flag] = []
    return _keys_walk(value, where, masked, flagged), masked, flagged


def _present(ids: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in ids.items() if value not in (None, "", [])}


def _in_ids(path: str, names: Iterable[str]) -> bool:
    return any(path == name or path.startswith(f"{name}[") for name in names)


#: An identifier's word separators, read as spaces when it is searched for instructions
#: (``ignore_all_previous_instructions`` reads as the sentence it spells).
_SEPARATORS = str.maketrans(dict.fromkeys("_.:/@+#-", " "))


def _spelled(value: Any) -> Any:
    if isinstance(value, str):
        return value.translate(_SEPARATORS)
    if isinstance(value, list):
        return [_spelled(item) for item in value]
    return value


def _at(value: Any, path: str, name: str) -> str:
    """The identifier at ``path`` (``name`` or ``name[i]``) as written."""
    if path != name and isinstance(value, list):
        index = int(path[len(name) + 1 : -1])
        value = value[index] if 0 <= index < len(value) else ""
    return str(value)


def _id_flags(named: Mapping[str, Any], found: Iterable[Flag]) -> list[Flag]:
    """Instruction-like identifiers, read with their separators as spaces: one flag per field
    and kind not ``found`` already, quoting the identifier as written."""
    spelled = {name: _spelled(value) for name, value in named.items()}
    if spelled == dict(named):
        return []
    seen = {(flag.field, flag.kind) for flag in found}
    flags: list[Flag] = []
    for flag in record_screen(spelled).flagged:
        if (flag.field, flag.kind) in seen:
            continue
        seen.add((flag.field, flag.kind))
        name = next((n for n in named if _in_ids(flag.field, (n,))), None)
        # None: the identifiers spell it only together (field "record"), read as joined.
        quote = (flag.passage if name is None else _at(named[name], flag.field, name))[:PASSAGE_MAX]
        flags.append(Flag(flag.field, flag.kind, flag.rule, quote))
    return flags


def write_screen(fields: Mapping[str, Any], ids: Mapping[str, Any] | None = None) -> WriteScreening:
    """Screens one write: ``fields`` (text, lists, JSON objects) are masked, keys included;
    ``ids`` (text or lists of text; None and "" are skipped) are never changed: a secret in one
    is a refusal. Instruction-like passages are flagged in both, by field path."""
    keyed: dict[str, Any] = {}
    key_masked: list[Masked] = []
    key_flagged: list[Flag] = []
    for name, value in fields.items():
        keyed[name], masks, flags = keys_screen(value, name)
        key_masked += masks
        key_flagged += flags
    named = _present(ids or {})
    clash = set(named) & set(keyed)
    assert not clash, f"a field is both free and an identifier: {sorted(clash)}"
    screened = record_screen({**keyed, **named})
    refused = tuple(Refusal(m.field, m.kind) for m in screened.masked if _in_ids(m.field, named))
    masked = [m for m in screened.masked if not _in_ids(m.field, named)]
    flagged = [*screened.flagged, *key_flagged, *_id_flags(named, screened.flagged)]
    flagged = flagged[:FLAGS_MAX]
    out = {name: screened.fields[name] for name in fields}
    return WriteScreening(
        screening=Screening(tuple(key_masked + masked), tuple(flagged), out),
        refused=refused,
        fields=out,
    )


def writes_clean(writes: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> bool:
    """Whether ``write_screen`` would find nothing (no mask, refusal or flag) in any of
    ``writes`` (its ``fields`` and ``ids`` each), found in one pass over them all: a batch (an
    import) screens write by write only where this says no. Each string is read as
    ``write_screen`` reads it, under the same key, and the keys as text."""
    batch = [
        [dict(fields), _present(ids), "\n".join(all_keys(dict(fields)))] for fields, ids in writes
    ]
    probe = record_screen({"writes": batch})
    return not probe.masked and not probe.flagged
