"""The epistemic trust model: C = p · (1 - Ue - Ua), R = 1 - C, and the action gate on R.

p is how much of the required context is present, Ue the epistemic uncertainty (divergence,
vagueness), Ua the aleatoric risk carried by the sources. Each input is clamped to [0, 1] and
Ue + Ua is capped at 1, so C and R always stay in [0, 1]. Pure Python so that the formula can be
property-tested without a database and reused by every caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import fmean, pvariance

PASS = "PASS"
REFINE = "REFINE"
ESCALATE = "ESCALATE"
DECISIONS = (PASS, REFINE, ESCALATE)

# Gate thresholds on R: below PASS_BELOW passes, from ESCALATE_FROM escalates, between refines.
PASS_BELOW = 0.25
ESCALATE_FROM = 0.60

# Divergence of a single trace cannot be measured; a fixed uncertainty stands in for it.
SINGLE_TRACE_DIVERGENCE = 0.2
DIGITS = 4


def clamp01(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


def action_gate(risk: float) -> str:
    """PASS when R < 0.25, REFINE when 0.25 ≤ R < 0.60, ESCALATE when R ≥ 0.60."""
    if risk < PASS_BELOW:
        return PASS
    if risk < ESCALATE_FROM:
        return REFINE
    return ESCALATE


@dataclass(frozen=True)
class TrustScore:
    p: float
    ue: float
    ua: float
    total_uncertainty: float
    confidence: float
    risk: float
    decision: str
    # The share of Ua that instruction-like content carries (see memoryproject.domain.screening).
    injection: float = 0.0

    def signals(self) -> dict[str, float]:
        """The inputs that explain the score, rounded for responses (``injection`` only when
        instruction-like content was found)."""
        signals = {
            "p": round(self.p, DIGITS),
            "ue": round(self.ue, DIGITS),
            "ua": round(self.ua, DIGITS),
            "total_uncertainty": round(self.total_uncertainty, DIGITS),
        }
        if self.injection:
            signals["injection"] = round(self.injection, DIGITS)
        return signals


def trust_score(*, p: float, ue: float, ua: float, injection: float = 0.0) -> TrustScore:
    """Scores one piece of context. ``confidence`` and ``risk`` are rounded to 4 decimals and
    always sum to exactly 1 (R is derived from the rounded C, so the gate sees what clients see).

    ``injection`` is the risk of instruction-like content: it is added into Ua (the sum capped
    at 1), so one flagged passage (0.6) alone puts R at or above the ESCALATE gate."""
    injection = clamp01(injection)
    p, ue, ua = clamp01(p), clamp01(ue), clamp01(clamp01(ua) + injection)
    total = min(1.0, ue + ua)
    confidence = round(p * (1.0 - total), DIGITS)
    risk = round(1.0 - confidence, DIGITS)
    return TrustScore(p, ue, ua, total, confidence, risk, action_gate(risk), injection)


def raw_confidence(*, p: float, ue: float, ua: float) -> float:
    """C before rounding: what the monotonicity properties are stated on."""
    p, ue, ua = clamp01(p), clamp01(ue), clamp01(ua)
    return p * (1.0 - min(1.0, ue + ua))


def divergence(scores: Sequence[float]) -> float:
    """Ue for a set of traces: the variance of their trust scores * 4, capped at 1.

    A single trace gets SINGLE_TRACE_DIVERGENCE; no traces have nothing to diverge (0).
    """
    if not scores:
        return 0.0
    if len(scores) == 1:
        return SINGLE_TRACE_DIVERGENCE
    return _spread(tuple(clamp01(s) for s in scores))


@lru_cache(maxsize=1024)
def _spread(scores: tuple[float, ...]) -> float:
    """The population variance * 4, capped at 1: computed exactly (``pvariance``), and kept
    per set of scores, since every plan scores the same recent traces until a new one comes."""
    return min(1.0, pvariance(scores) * 4.0)


def mean_risk(risks: Sequence[float]) -> float:
    """Ua for a set of traces: the mean of their risks (0 when there are none)."""
    return fmean(clamp01(r) for r in risks) if risks else 0.0
