"""Trace scores are consistent: R = 1 - C, and a decision is the gate of the risk.

trust_score and risk sent together must agree (|C + R - 1| <= 1e-6); one alone gives the other.
A decision sent by the client must be the gate of the stored risk (PASS below 0.25, REFINE below
0.60, else ESCALATE). Anything else is a 400 naming the field, and nothing is written.
"""

from __future__ import annotations

import pytest

from memoryproject.errors import ApplicationError
from sessions_app.models import Trace
from sessions_app.trace_writes import trace_record

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"trust_score": 0.9, "risk": 0.9}, "risk", "risk: must equal 1 - trust_score (0.1000)"),
        ({"trust_score": 0.2, "risk": 0.2}, "risk", "risk: must equal 1 - trust_score (0.8000)"),
        ({"trust_score": 0.9, "decision": "ESCALATE"}, "decision", "decision: must be PASS"),
        ({"risk": 0.3, "decision": "PASS"}, "decision", "decision: must be REFINE"),
        ({"trust_score": 0.3, "risk": 0.7, "decision": "REFINE"}, "decision", "must be ESCALATE"),
        ({"decision": "PASS", "active_project": "p"}, "decision", "must be ESCALATE"),
    ],
)
def test_self_contradictory_scores_are_400_naming_the_field_and_write_nothing(
    api, body, field, rule
):
    response = api.post("/v1/traces", body, format="json")
    assert response.status_code == 400, response.content
    answer = response.json()
    assert list(answer["fields"]) == [field] and rule in answer["message"]
    assert not Trace.objects.exists()


@pytest.mark.parametrize(
    ("body", "stored"),
    [
        ({"trust_score": 0.9, "risk": 0.1}, (0.9, 0.1, "PASS")),
        ({"trust_score": 0.7, "risk": 0.30000000001}, (0.7, 0.3, "REFINE")),
        ({"trust_score": 0.4, "risk": 0.6, "decision": "ESCALATE"}, (0.4, 0.6, "ESCALATE")),
        ({"risk": 0.25, "decision": "REFINE"}, (0.75, 0.25, "REFINE")),
        ({"trust_score": 0.12345}, (0.1235, 0.8765, "ESCALATE")),
        ({"risk": 0.24999}, (0.75, 0.25, "REFINE")),
    ],
)
def test_consistent_scores_are_stored_with_r_equal_to_1_minus_c(api, body, stored):
    response = api.post("/v1/traces", body, format="json")
    assert response.status_code == 201, response.content
    answer = response.json()
    assert (answer["trust_score"], answer["risk"], answer["decision"]) == stored
    trace = Trace.objects.get()
    assert trace.trust_score + trace.risk == pytest.approx(1.0, abs=1e-9)


def test_every_door_applies_the_same_rule(default_project):
    with pytest.raises(ApplicationError) as refused:
        trace_record(project=default_project, trust_score=0.9, risk=0.9)
    assert refused.value.message.startswith("risk: must equal 1 - trust_score")
    with pytest.raises(ApplicationError) as wrong:
        trace_record(project=default_project, trust_score=0.95, decision="REFINE")
    assert wrong.value.message.startswith("decision: must be PASS, the gate of risk 0.0500")
    assert not Trace.objects.exists()
