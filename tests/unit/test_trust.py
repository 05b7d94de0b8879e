"""The trust formula C = p * (1 - Ue - Ua), R = 1 - C, and the action gate on R."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions_app.domain.trust import (
    ESCALATE,
    PASS,
    REFINE,
    action_gate,
    divergence,
    mean_risk,
    raw_confidence,
    trust_score,
)

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def test_complete_agreeing_low_risk_context_passes_with_high_trust():
    score = trust_score(p=0.9, ue=0.05, ua=0.05)
    assert score.decision == PASS
    assert score.confidence > 0.8
    assert score.confidence == pytest.approx(0.81)


def test_sparse_divergent_risky_context_escalates():
    score = trust_score(p=0.3, ue=0.6, ua=0.3)
    assert score.decision == ESCALATE
    assert score.confidence == pytest.approx(0.03)


def test_uncertainty_is_capped_at_one_so_confidence_never_goes_negative():
    score = trust_score(p=1.0, ue=0.8, ua=0.7)
    assert score.total_uncertainty == 1.0
    assert score.confidence == 0.0
    assert score.risk == 1.0


def test_inputs_outside_the_unit_interval_are_clamped():
    score = trust_score(p=1.7, ue=-0.3, ua=-1)
    assert (score.p, score.ue, score.ua) == (1.0, 0.0, 0.0)
    assert score.confidence == 1.0


def test_gate_boundaries_follow_risk():
    assert action_gate(0.2499) == PASS
    assert action_gate(0.25) == REFINE
    assert action_gate(0.5999) == REFINE
    assert action_gate(0.60) == ESCALATE


def test_signals_explain_the_score_rounded_to_four_decimals():
    score = trust_score(p=2 / 3, ue=0.123456, ua=0.0)
    assert score.signals() == {"p": 0.6667, "ue": 0.1235, "ua": 0.0, "total_uncertainty": 0.1235}
    assert score.confidence == round(score.confidence, 4)


def test_a_single_trace_has_fixed_divergence_and_agreeing_traces_none():
    assert divergence([0.9]) == 0.2
    assert divergence([0.8, 0.8, 0.8]) == 0.0
    assert divergence([0.0, 1.0]) == 1.0  # variance 0.25 * 4
    assert divergence([]) == 0.0


def test_aleatoric_uncertainty_is_the_mean_risk():
    assert mean_risk([0.1, 0.3]) == pytest.approx(0.2)
    assert mean_risk([]) == 0.0


@given(p=unit, ue=unit, ua=unit)
def test_confidence_and_risk_always_sum_to_one(p, ue, ua):
    score = trust_score(p=p, ue=ue, ua=ua)
    assert score.confidence + score.risk == pytest.approx(1.0, abs=1e-9)
    assert 0.0 <= score.confidence <= 1.0
    assert score.total_uncertainty <= 1.0


@given(p1=unit, p2=unit, ue=unit, ua=unit)
def test_confidence_rises_with_coverage(p1, p2, ue, ua):
    low, high = sorted((p1, p2))
    assert raw_confidence(p=low, ue=ue, ua=ua) <= raw_confidence(p=high, ue=ue, ua=ua)
    assert (
        trust_score(p=low, ue=ue, ua=ua).confidence <= trust_score(p=high, ue=ue, ua=ua).confidence
    )


@given(p=unit, u1=unit, u2=unit, ua=unit)
def test_confidence_falls_with_epistemic_uncertainty(p, u1, u2, ua):
    low, high = sorted((u1, u2))
    assert raw_confidence(p=p, ue=high, ua=ua) <= raw_confidence(p=p, ue=low, ua=ua)
    assert trust_score(p=p, ue=high, ua=ua).confidence <= trust_score(p=p, ue=low, ua=ua).confidence


@given(p=unit, ue=unit, a1=unit, a2=unit)
def test_confidence_falls_with_aleatoric_uncertainty(p, ue, a1, a2):
    low, high = sorted((a1, a2))
    assert raw_confidence(p=p, ue=ue, ua=high) <= raw_confidence(p=p, ue=ue, ua=low)
    assert trust_score(p=p, ue=ue, ua=high).confidence <= trust_score(p=p, ue=ue, ua=low).confidence


@given(p=unit, ue=unit, ua=unit)
def test_decision_is_the_gate_applied_to_the_returned_risk(p, ue, ua):
    score = trust_score(p=p, ue=ue, ua=ua)
    assert score.decision == action_gate(score.risk)
