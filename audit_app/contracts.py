"""Outputs of the audit trail's reads."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from graph_app.contracts.integrity import IntegrityResult
from memoryproject.contracts import AwareDatetime, Input, Output, UtcDatetime, WitnessCheck

BreakKind = Literal[
    "altered",
    "rewritten",
    "link",
    "gap",
    "renumbered",
    "inserted",
    "duplicate",
    "beyond_head",
    "head",
    "truncated",
    "checkpoint",
    "anchor",
    "text",
]


class BrokenRecord(Output):
    """The first record that breaks the chain: ``id`` is None when the record named is missing
    (a truncated tail, a checkpointed record no longer there)."""

    id: int | None
    seq: int
    kind: BreakKind = Field(
        description=(
            "altered: its fields no longer match its hash; rewritten: rewritten and rehashed "
            "(the next record still links to its original hash); link: its prev_hash is wrong; "
            "gap: records before it are missing; renumbered: its seq was changed; inserted: "
            "not written by the application; duplicate: a copy of another record; beyond_head: "
            "appended after the head; head / checkpoint: differs from the hash the head or a "
            "checkpoint holds; truncated: records the head or a checkpoint covers are gone; "
            "anchor: the purge anchor does not hold; text: its delivered text was altered or "
            "removed without erasure."
        )
    )
    reason: str


class ChainPoint(Output):
    """A (seq, hash) the chain is held to."""

    seq: int
    hash: str


class ChainAnchor(Output):
    """Where verification starts: genesis, or the last record the latest purge removed (as
    its purge event, itself a record of the chain, states)."""

    kind: Literal["genesis", "purge"]
    seq: int
    hash: str
    event_seq: int | None = None
    before: UtcDatetime | None = None


class CheckpointCheck(Output):
    """A checkpoint the log was held to: its signature, and whether the checkpointed head is
    still in the chain at its seq (prefix consistency)."""

    source: Literal["file", "stored"]
    id: int | None
    created_at: UtcDatetime
    seq: int
    hash: str
    signature_ok: bool
    consistent: bool
    reason: str


class ChainVerification(Output):
    ok: bool
    checked: int = Field(description="Records verified before the first break (or all).")
    first_broken: BrokenRecord | None
    head: ChainPoint | None = None
    anchor: ChainAnchor | None = None
    checkpoints: list[CheckpointCheck] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    witness: WitnessCheck | None = Field(
        default=None, description="The log held to the witness kept outside the database."
    )


class LogHeadOut(Output):
    seq: int
    head: str
    head_created_at: UtcDatetime | None


class GraphHeadOut(Output):
    size: int
    head: str


class CheckpointBody(Output):
    """What a checkpoint signs: the log's head and each project's graph chain head."""

    version: int
    created_at: UtcDatetime
    log: LogHeadOut
    graph: dict[str, GraphHeadOut]


class CheckpointOut(Output):
    """A signed checkpoint (``hmac``: HMAC-SHA256 of the body's RFC 8785 JSON)."""

    omit_when_none = frozenset({"file"})

    id: int | None
    body: CheckpointBody
    hmac: str
    file: str | None = None


class PurgeResult(Output):
    """What a retention purge removed (or, on a dry run, would remove)."""

    before: UtcDatetime
    retention_days: int
    dry_run: bool
    from_seq: int | None
    through_seq: int | None
    records: int
    texts: int
    event_seq: int | None
    anchor: ChainPoint | None


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


class ErasedItem(Output):
    kind: str
    id: str
    sha256: str = Field(description="Content hash of what was erased (its tombstone).")


class ErasureCertificate(Output):
    target: str
    ref: str
    project: str | None
    erased: list[ErasedItem]
    receipts: list[int] = Field(description="Seq of every receipt that had delivered it.")
    texts_erased: list[str] = Field(description="SHA-256 of the delivered texts removed.")
    reason: str
    by: str
    erased_at: UtcDatetime
    event_seq: int = Field(description="The erasure event in the injection log.")


class InjectionOut(Output):
    """One record of the injection log, as auditors read it."""

    id: int
    seq: int
    project: str | None
    source: str = Field(
        description="plan, load, compile, prompt, or an event: erasure, purge, review."
    )
    channel: str
    client: str = Field(
        description="The authenticated identity: api_key:<prefix> (<name>), "
        "local:<project>/<scope>, or the command that wrote it."
    )
    client_reported: str = Field(
        default="",
        description="The name the client gave itself (MCP initialize): self-reported, unverified.",
    )
    status: str
    decision: str
    trust_score: float
    threshold: float
    mode: str
    trace_ids: list[str]
    request: dict[str, Any] = Field(description="What was asked (or an event's details).")
    items: list[dict[str, str]] = Field(description="Sources delivered: kind, id, sha256.")
    prompt_sha256: str = Field(description="SHA-256 of the exact text delivered.")
    generated_at: UtcDatetime
    created_at: UtcDatetime
    prev_hash: str
    record_hash: str


class InjectionPage(Output):
    count: int
    next: str | None
    previous: str | None
    results: list[InjectionOut]


class SourceNow(Output):
    kind: str
    id: str
    sha256: str = Field(description="Its content hash when delivered.")
    sha256_now: str | None = Field(description="Its content hash now (null: no longer there).")
    changed_since: bool
    erased: bool


class InjectionDetail(InjectionOut):
    text: str = Field(description="The text as delivered (empty once erased).")
    text_erased: bool
    sources: list[SourceNow] = Field(description="Each delivered source, and whether it changed.")


class AuditVerifyInput(Input):
    """Verification takes no arguments: the projects are the caller's (``project`` narrows
    them to one)."""


class ProjectBreak(BrokenRecord):
    """The first break of the log, when it is a record of one of the answer's projects."""

    project: str


class LogVerification(Output):
    """The injection log as the answer's projects see it. The whole chain is verified, every
    project's records included, so a break anywhere makes ``ok`` false; but only records of
    the answer's projects are named."""

    ok: bool = Field(
        description="The whole log verifies: every record of every project, its head, anchor "
        "and latest checkpoint."
    )
    statement: str = Field(
        description="Whether the log verifies and, when not, where (only when the first break "
        "is a record of the answer's projects)."
    )
    checked: int = Field(
        description="Records of the answer's projects verified (before the first break, or all)."
    )
    first_broken: ProjectBreak | None = Field(
        description="The first break, when it is a record of the answer's projects; null "
        "otherwise, even when ok is false."
    )
    latest: ChainPoint | None = Field(
        description="The newest record of the answer's projects (seq, record_hash); null when "
        "they have none."
    )


class AuditorFigures(Output):
    """What only the auditor role sees: figures of the whole log and of every project."""

    log: ChainVerification = Field(
        description="The whole log's verification: records checked, head, anchor, stored "
        "checkpoints, warnings, and the first break wherever it is."
    )
    checkpoint: CheckpointOut | None = Field(
        description="The latest stored checkpoint (the log head and every project's graph head "
        "it signs); null when none is stored."
    )


class AuditVerification(Output):
    """The injection log and the graphs of the caller's projects, verified against their heads
    and the latest stored checkpoint. Global figures (``auditor``) need the auditor role: an
    admin-scope key bound to every project."""

    verified: bool = Field(description="The log and every graph listed verify.")
    projects: list[str] = Field(description="The projects this answer covers.")
    log: LogVerification
    graph: dict[str, IntegrityResult] = Field(description="Each covered project's graph.")
    auditor: AuditorFigures | None = Field(
        description="Global figures, for the auditor role only (null for a key that does not "
        "reach every project)."
    )
