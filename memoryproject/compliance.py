"""The compliance port: where the apps that deliver memory append their receipts, queue and
claim reviews, and read open contradiction findings, without importing the app that keeps them.

The injection log, the review queue and the findings live in ``audit_app``, above
``sessions_app`` and ``graph_app``; ``audit_app`` fills this port in its ``AppConfig.ready()``
(``compliance_register``), so the delivering apps call ``compliance()`` and never import it.
The port holds the functions themselves: their signatures and documentation are
``audit_app.injection_log.injection_log_append``, ``audit_app.reviews.review_open``,
``review_claim``, ``review_delivered`` and ``audit_app.finding_selectors.open_findings_of_facts``.
Calls run in the caller's transaction, so a delivery and its receipt commit or fail together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class Receipt(Protocol):
    """A receipt of the injection log as a delivering app reads it."""

    pk: Any


class ReviewRecord(Protocol):
    """A queued review as a delivering app reads it (to deliver what a reviewer approved)."""

    pk: Any
    decision: str
    trust_score: float
    risk: float
    threshold: float
    trace_ids: list[str]
    items: list[dict[str, str]]
    signals: Any
    context: Any
    text: str
    decided_by: str


@dataclass(frozen=True)
class Compliance:
    receipt_append: Callable[..., Receipt]
    review_open: Callable[..., ReviewRecord]
    review_claim: Callable[..., ReviewRecord | None]
    review_delivered: Callable[..., None]
    open_findings_of_facts: Callable[..., dict[str, int]]


_port: list[Compliance] = []


def compliance_register(port: Compliance) -> None:
    """Called once by the app that keeps the injection log, when it is ready."""
    _port[:] = [port]


def compliance() -> Compliance:
    """The registered port; refuses when the injection log's app is not installed, since no
    memory may be delivered without its receipt."""
    if not _port:
        raise RuntimeError("the injection log (audit_app) is not installed: nothing is delivered")
    return _port[0]
