"""Outputs of the audit trail's reads."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from memoryproject.contracts import AwareDatetime, Input, Output, UtcDatetime


class BrokenRecord(Output):
    id: int
    seq: int
    reason: str


class ChainVerification(Output):
    ok: bool
    checked: int
    first_broken: BrokenRecord | None


class ContradictionAuditInput(Input):
    as_of: Annotated[
        AwareDatetime | None,
        Field(description="Audit the facts held at this time (default now)."),
    ] = None
    auto_resolve: Annotated[
        bool,
        Field(
            description=(
                "Retire the older side of each resolvable conflict into history (through "
                "supersession); what cannot be resolved safely stays open for a person."
            )
        ),
    ] = False


class FindingOut(Output):
    id: int
    rule: Literal["negation", "antonym", "alias", "drift"]
    subject: str
    fact_ids: list[str] = Field(description="The conflicting facts, oldest first.")
    evidence: str
    suggestion: str
    resolvable: bool
    state: Literal["open", "resolved", "dismissed"]
    settled_by: str
    reason: str


class ContradictionAuditResult(Output):
    run_id: int
    project: str
    as_of: UtcDatetime
    facts_checked: int
    open: int = Field(description="Findings left open after this run.")
    auto_resolved: int
    findings: list[FindingOut] = Field(
        description="What this run found (dismissed conflicts are not reported again)."
    )
