"""The contradiction rules, each with facts that must be flagged and facts that must not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from audit_app.domain.contradictions import (
    HeldFact,
    RuleBook,
    contradictions_find,
    polarity,
    relation_key,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fact(fid, subject, predicate, value, *, singular=True, day=0, recorded=None):
    return HeldFact(
        id=fid,
        subject=subject,
        predicate=predicate,
        value=value,
        singular=singular,
        valid_from=T0 + timedelta(days=day),
        recorded_at=T0 + timedelta(days=day if recorded is None else recorded),
        sha256=f"hash-{fid}-{value}",
    )


def rules_of(facts, book=None):
    return [(f.rule, f.fact_ids) for f in contradictions_find(facts, book)]


def test_negated_predicate_with_the_same_object_is_a_negation():
    facts = [
        fact("a", "svc", "uses", "redis", singular=False),
        fact("b", "svc", "does_not_use", "redis", singular=False, day=3),
    ]
    [finding] = contradictions_find(facts)
    assert (finding.rule, finding.fact_ids) == ("negation", ("a", "b"))
    assert finding.keep == "b" and finding.retire == ("a",)
    assert "a" in finding.evidence and "b" in finding.evidence


def test_negated_predicate_with_another_object_is_no_contradiction():
    facts = [
        fact("a", "svc", "uses", "redis", singular=False),
        fact("b", "svc", "does_not_use", "memcached", singular=False),
    ]
    assert rules_of(facts) == []


def test_opposite_booleans_are_a_negation_even_across_aliases():
    facts = [fact("a", "api", "is_enabled", "true"), fact("b", "api", "enabled", "False", day=1)]
    assert rules_of(facts) == [("negation", ("a", "b"))]


def test_antonymous_objects_are_flagged_and_the_list_is_extensible():
    facts = [
        fact("a", "queue", "delivery", "sync", singular=False),
        fact("b", "queue", "delivery", "async", singular=False, day=2),
    ]
    assert rules_of(facts) == [("antonym", ("a", "b"))]
    custom = [
        fact("c", "cache", "policy", "write_through", singular=False),
        fact("d", "cache", "policy", "write_back", singular=False, day=1),
    ]
    assert rules_of(custom) == []
    book = RuleBook(antonyms=(("write_through", "write_back"),))
    assert rules_of(custom, book) == [("antonym", ("c", "d"))]


def test_same_object_or_other_subject_is_no_antonym():
    facts = [
        fact("a", "queue", "delivery", "sync", singular=False),
        fact("b", "other_queue", "delivery", "async", singular=False),
        fact("c", "queue", "delivery", "sync", singular=False, day=1),
    ]
    assert rules_of(facts) == []


def test_predicate_aliases_with_different_objects_collide():
    facts = [
        fact("a", "auth_service", "uses_token_format", "JWT_HS256"),
        fact("b", "auth_service", "token_format", "PASETO_v4_public", day=5),
    ]
    assert rules_of(facts) == [("alias", ("a", "b"))]
    agreeing = [
        fact("a", "auth_service", "uses_token_format", "JWT_HS256"),
        fact("b", "auth_service", "token_format", "jwt-hs256", day=5),
    ]
    assert rules_of(agreeing) == []


def test_the_alias_map_joins_predicates_normalisation_cannot():
    facts = [fact("a", "db", "engine", "postgres"), fact("b", "db", "database", "mysql", day=1)]
    assert rules_of(facts) == []
    book = RuleBook(aliases={"database": "engine"})
    assert rules_of(facts, book) == [("alias", ("a", "b"))]


def test_several_values_of_a_predicate_singular_in_practice_drift():
    facts = [
        fact("a", "billing", "language", "python", singular=False),
        fact("b", "billing", "language", "go", singular=False, day=1),
        fact("c", "billing", "language", "rust", singular=False, day=2),
        fact("d", "search", "language", "java", singular=True),
    ]
    [finding] = contradictions_find(facts)
    assert finding.rule == "drift" and finding.fact_ids == ("a", "b", "c")
    assert finding.keep == "c" and set(finding.retire) == {"a", "b"}


def test_relational_predicates_hold_several_values_without_drift():
    facts = [
        fact("a", "orders", "depends_on", "payment_ledger", singular=False),
        fact("b", "orders", "depends_on", "inventory", singular=False, day=1),
        fact("c", "billing", "depends_on", "ledger", singular=True),
    ]
    assert rules_of(facts) == []


def test_a_tie_is_not_resolvable():
    facts = [fact("a", "api", "is_enabled", "true"), fact("b", "api", "enabled", "false")]
    [finding] = contradictions_find(facts)
    assert finding.keep is None and finding.retire == ()
    assert "person" in finding.suggestion


def test_fingerprint_changes_when_a_fact_changes():
    first = contradictions_find(
        [fact("a", "svc", "uses", "x", singular=False), fact("b", "svc", "not_uses", "x", day=1)]
    )[0]
    again = contradictions_find(
        [fact("a", "svc", "uses", "x", singular=False), fact("b", "svc", "not_uses", "x", day=1)]
    )[0]
    changed = contradictions_find(
        [fact("a", "svc", "uses", "X ", singular=False), fact("b", "svc", "not_uses", "x", day=1)]
    )[0]
    assert first.fingerprint == again.fingerprint != changed.fingerprint


@pytest.mark.parametrize(
    ("predicate", "positive"),
    [("uses", True), ("does_not_use", False), ("isNotEnabled", False), ("never_calls", False)],
)
def test_polarity_reads_negation_words_in_any_identifier_style(predicate, positive):
    assert polarity(predicate) is positive


def test_relation_key_ignores_polarity_auxiliaries_and_generic_verbs():
    book = RuleBook()
    assert relation_key("uses_token_format", book) == relation_key("tokenFormat", book)
    assert relation_key("does_not_use", book) == relation_key("uses", book)
    assert relation_key("depends_on", book) != relation_key("owns", book)
