"""Contradiction rules over the facts that hold at one moment. Pure Python: no Django import.

Four rules, each over the facts of one subject:

- ``negation``: the same statement with opposite polarity: ``uses X`` against ``does_not_use X``
  (a negation word in one predicate), or one predicate with opposite boolean objects
  (``is_enabled true`` against ``is_enabled false``).
- ``antonym``: one predicate (or its aliases) with antonymous objects (enabled/disabled,
  sync/async, allowed/forbidden, required/optional, ...; users extend the list).
- ``alias``: two predicates that name the same relation (``uses_token_format`` and
  ``token_format``: equal once normalised, or mapped together by the alias map) with different
  objects.
- ``drift``: several values of one predicate that is singular in practice (asserted singular
  somewhere in the project, or configured so) held at once.

A finding names the facts (oldest first), the rule, the evidence and a suggestion. It is
resolvable when one side is strictly newer (valid from a later time): the older side can then be
retired into history. Its fingerprint covers the rule and the facts' content
hashes, so a dismissed finding stays quiet until one of its facts changes.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations

from graph_app.domain.tokenize import split_identifier, stem

NEGATIONS = frozenset({"not", "no", "never", "non", "dont", "doesnt", "isnt", "cannot", "without"})
AUXILIARIES = frozenset({"do", "does", "is", "are", "be", "was", "were", "should", "must", "can"})
# Verbs that only say "has this property": uses_token_format and token_format are one relation.
GENERIC_VERBS = frozenset({"use", "has", "have", "get", "with"})
TRUE_WORDS = frozenset({"true", "yes", "on", "1", "enabled", "enable"})
FALSE_WORDS = frozenset({"false", "no", "off", "0", "disabled", "disable"})
DEFAULT_ANTONYMS: tuple[tuple[str, str], ...] = (
    ("enabled", "disabled"),
    ("sync", "async"),
    ("synchronous", "asynchronous"),
    ("allowed", "forbidden"),
    ("allow", "deny"),
    ("required", "optional"),
    ("public", "private"),
    ("mutable", "immutable"),
    ("stateful", "stateless"),
    ("blocking", "non_blocking"),
    ("encrypted", "unencrypted"),
    ("online", "offline"),
    ("supported", "unsupported"),
    ("deprecated", "recommended"),
    ("idempotent", "non_idempotent"),
    ("strict", "lenient"),
)
# Relations that hold several values by nature: never "drift".
DEFAULT_RELATIONAL = frozenset(
    {"depends_on", "calls", "owns", "uses", "imports", "reads", "writes", "publishes_to"}
)


@dataclass(frozen=True)
class HeldFact:
    """A fact as the rules see it: what it says and when it was said."""

    id: str
    subject: str
    predicate: str
    value: str
    singular: bool
    valid_from: datetime
    recorded_at: datetime
    sha256: str


@dataclass(frozen=True)
class RuleBook:
    """What users can extend: antonym pairs, predicate aliases (name -> canonical name),
    predicates singular in practice, and relational predicates that never drift."""

    antonyms: tuple[tuple[str, str], ...] = DEFAULT_ANTONYMS
    aliases: Mapping[str, str] = field(default_factory=dict)
    singular: frozenset[str] = frozenset()
    relational: frozenset[str] = DEFAULT_RELATIONAL

    def opposite(self, a: str, b: str) -> bool:
        pairs = {(x, y) for x, y in self.antonyms} | {(y, x) for x, y in self.antonyms}
        return (a, b) in pairs


@dataclass(frozen=True)
class Finding:
    rule: str
    subject: str
    fact_ids: tuple[str, ...]
    evidence: str
    suggestion: str
    keep: str | None
    retire: tuple[str, ...]
    fingerprint: str

    @property
    def resolvable(self) -> bool:
        return self.keep is not None


def normalise_value(value: str) -> str:
    return "_".join(value.strip().lower().replace("-", " ").split())


def _words(predicate: str) -> list[str]:
    return [w.lower() for w in split_identifier(predicate) if w]


def polarity(predicate: str) -> bool:
    """False when the predicate negates (``does_not_use``, ``is_not_enabled``)."""
    return sum(1 for w in _words(predicate) if w in NEGATIONS) % 2 == 0


def relation_key(predicate: str, book: RuleBook) -> tuple[str, ...]:
    """What relation a predicate names, whatever its polarity, auxiliaries and generic verbs."""
    name = book.aliases.get(predicate, predicate)
    words = [stem(w) for w in _words(name) if w not in NEGATIONS | AUXILIARIES]
    core = tuple(w for w in words if w not in GENERIC_VERBS)
    return core or tuple(words)


def _order(facts: Iterable[HeldFact]) -> list[HeldFact]:
    return sorted(facts, key=lambda f: (f.valid_from, f.recorded_at, f.id))


def _fingerprint(rule: str, facts: Sequence[HeldFact]) -> str:
    parts = [rule, *sorted(f"{f.id}:{f.sha256}" for f in facts)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _line(fact: HeldFact) -> str:
    return f"{fact.subject} --({fact.predicate})--> {fact.value} [{fact.id}]"


def _finding(rule: str, facts: Sequence[HeldFact], evidence: str) -> Finding:
    ordered = _order(facts)
    newest, older = ordered[-1], ordered[:-1]
    # Only a strictly later start says which side holds now; the order two statements were
    # recorded in does not (superseding at the same instant would leave a zero-width fact).
    clear = all(f.valid_from < newest.valid_from for f in older)
    if clear:
        suggestion = (
            f"keep the newest, {newest.id} (valid from {newest.valid_from:%Y-%m-%d}), and "
            f"retire {', '.join(f.id for f in older)} into history"
        )
    else:
        suggestion = "both sides hold from the same moment: a person must decide which is true"
    return Finding(
        rule=rule,
        subject=newest.subject,
        fact_ids=tuple(f.id for f in ordered),
        evidence=evidence + ": " + "; ".join(_line(f) for f in ordered),
        suggestion=suggestion,
        keep=newest.id if clear else None,
        retire=tuple(f.id for f in older) if clear else (),
        fingerprint=_fingerprint(rule, ordered),
    )


def _pair_rule(a: HeldFact, b: HeldFact, book: RuleBook) -> tuple[str, str] | None:
    """The rule a pair of facts of one subject and relation breaks, with its evidence."""
    va, vb = normalise_value(a.value), normalise_value(b.value)
    if polarity(a.predicate) != polarity(b.predicate):
        if va == vb:
            return "negation", "one predicate negates the other for the same object"
        return None
    if (va in TRUE_WORDS and vb in FALSE_WORDS) or (va in FALSE_WORDS and vb in TRUE_WORDS):
        return "negation", f"opposite truth values ({a.value} / {b.value})"
    if book.opposite(va, vb):
        return "antonym", f"antonymous objects ({a.value} / {b.value})"
    if a.predicate != b.predicate and va != vb:
        return "alias", f"'{a.predicate}' and '{b.predicate}' name the same relation"
    return None


def _singular_in_practice(predicate: str, facts: Sequence[HeldFact], book: RuleBook) -> bool:
    if predicate in book.relational:
        return False
    return predicate in book.singular or any(f.singular for f in facts)


def contradictions_find(facts: Iterable[HeldFact], book: RuleBook | None = None) -> list[Finding]:
    """Every contradiction among ``facts`` (the facts held at one moment), subject by subject."""
    book = book or RuleBook()
    groups: dict[tuple[str, tuple[str, ...]], list[HeldFact]] = defaultdict(list)
    all_facts = list(facts)
    for fact in all_facts:
        groups[(fact.subject, relation_key(fact.predicate, book))].append(fact)
    singular = {
        p
        for p in {f.predicate for f in all_facts}
        if _singular_in_practice(p, [f for f in all_facts if f.predicate == p], book)
    }
    findings: list[Finding] = []
    for members in groups.values():
        drift: dict[str, list[HeldFact]] = defaultdict(list)
        for a, b in combinations(_order(members), 2):
            verdict = _pair_rule(a, b, book)
            if verdict is not None:
                findings.append(_finding(verdict[0], [a, b], verdict[1]))
            elif (
                a.predicate == b.predicate
                and a.predicate in singular
                and normalise_value(a.value) != normalise_value(b.value)
            ):
                drift[a.predicate] += [f for f in (a, b) if f not in drift[a.predicate]]
        for predicate, held in drift.items():
            evidence = f"{len(held)} values of '{predicate}', which is singular in practice"
            findings.append(_finding("drift", held, evidence))
    return sorted(findings, key=lambda f: (f.subject, f.rule, f.fact_ids))
