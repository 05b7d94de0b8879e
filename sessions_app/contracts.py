"""Inputs and outputs of session memory: traces, plans, saved and loaded summaries.

Each model is the one definition of its operation's arguments (defaults, bounds, descriptions)
or answer, read by the service, the REST view, the MCP tool and the OpenAPI schema alike.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, computed_field, model_validator
from pydantic_core import PydanticCustomError

from memoryproject.contracts import (
    AwareDatetime,
    BlankIsNone,
    Input,
    Output,
    RequiredText,
    Unit,
    UtcDatetime,
    has_nul,
    rule_error,
)
from memoryproject.domain.canonical import CanonicalizationError, canonical_json
from memoryproject.errors import ApplicationError, validation_error
from memoryproject.screening import (
    QUARANTINED_DESCRIPTION,
    FlaggedOut,
    QuarantinedOut,
    ScreeningOut,
)

Decision = Literal["PASS", "REFINE", "ESCALATE"]
Mode = Literal["auto", "force", "dry_run"]
TRACE_METADATA_MAX_BYTES = 65_536
#: How far trust_score + risk may be from 1 (R = 1 - C).
SCORE_TOLERANCE = 1e-6
#: The structured context fields a trace may carry, at the top level or inside metadata.
CONTEXT_TEXT_FIELDS = ("active_project", "last_decision", "current_output")
CONTEXT_LIST_FIELDS = ("open_questions", "key_files")
#: What a trace records of its step; a trace must carry at least one (trace_id and created_at
#: only say which step and when).
TRACE_RECORDED_FIELDS = (
    "model",
    "policy",
    *CONTEXT_TEXT_FIELDS,
    *CONTEXT_LIST_FIELDS,
    "status_code",
    "trust_score",
    "risk",
    "decision",
    "metadata",
)


# --- traces -----------------------------------------------------------------------------------


def _uuid(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise rule_error(f"'{value}' is not a UUID") from None


def _canonical_problem(value: Any) -> str | None:
    """Why ``value`` has no canonical JSON (RFC 8785, what a trace's hash reads): an integer
    beyond JSON's safe range, NaN or the like; None when it has one."""
    try:
        canonical_json(value)
    except (CanonicalizationError, TypeError) as exc:
        return f"must be plain JSON ({exc})"
    return None


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise rule_error(f"must be JSON-serialisable ({exc})") from None
    problem = _canonical_problem(value)
    if problem:
        raise rule_error(problem)
    if has_nul(value):
        raise rule_error("must not contain NUL characters")
    if size > TRACE_METADATA_MAX_BYTES:
        raise rule_error(f"must be at most {TRACE_METADATA_MAX_BYTES} bytes of JSON, got {size}")
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_json_object)]


def _given(value: Any) -> bool:
    return value is not None and value != {} and value != []


class TraceInput(Input):
    """One recorded step of agent work. Keys the model does not name are kept in metadata.

    At least one field must record the step (an empty one would only push real traces out of
    the plan's n most recent), and a text field that is sent must hold more than whitespace:
    leave it out instead.
    """

    model_config = ConfigDict(extra="allow")

    trace_id: Annotated[
        str | None, BlankIsNone, AfterValidator(_uuid), Field(description="UUID; default new")
    ] = None
    created_at: Annotated[
        AwareDatetime | None, BlankIsNone, Field(description="When it happened; default now")
    ] = None
    model: Annotated[
        RequiredText | None, Field(max_length=200, description="Model that ran; not blank")
    ] = None
    policy: Annotated[
        RequiredText | None, Field(max_length=64, description="What produced the trace; not blank")
    ] = None
    decision: Annotated[
        Decision | None,
        BlankIsNone,
        Field(
            description="Default: the gate of the risk (PASS below 0.25, REFINE below 0.60, "
            "else ESCALATE); when given it must be that gate."
        ),
    ] = None
    trust_score: Annotated[Unit | None, Field(description="0..1; default scored")] = None
    risk: Annotated[
        Unit | None,
        Field(description="0..1; default 1 - trust_score; with it, must equal 1 - trust_score."),
    ] = None
    status_code: Annotated[int | None, Field(ge=100, le=599)] = None
    active_project: str | None = None
    last_decision: str | None = None
    current_output: str | None = None
    open_questions: list[str] | str | None = None
    key_files: list[str] | str | None = None
    metadata: Annotated[Metadata | None, Field(description="Any JSON object")] = None

    @model_validator(mode="after")
    def _records_something(self) -> TraceInput:
        extra = self.model_extra or {}
        if any(_given(getattr(self, name)) for name in TRACE_RECORDED_FIELDS) or any(
            _given(value) for value in extra.values()
        ):
            return self
        fields = ", ".join(TRACE_RECORDED_FIELDS)
        raise ApplicationError(
            f"body: a trace must record its step: send at least one of {fields}", field="body"
        )

    @model_validator(mode="after")
    def _extra_keys_are_plain_json(self) -> TraceInput:
        # Kept in metadata, and so hashed with the trace: a value without a canonical form
        # (an integer beyond 2**53) would fail there, a 500.
        for name, value in (self.model_extra or {}).items():
            problem = _canonical_problem(value)
            if problem:
                raise validation_error(name, problem)
        return self

    @model_validator(mode="after")
    def _scores_agree(self) -> TraceInput:
        # R = 1 - C: a trace that says both must say the same thing twice.
        trust, risk = self.trust_score, self.risk
        if trust is not None and risk is not None and abs(trust + risk - 1.0) > SCORE_TOLERANCE:
            raise validation_error(
                "risk", f"must equal 1 - trust_score ({1.0 - trust:.4f}), got {risk}"
            )
        return self

    def merged_metadata(self) -> dict[str, Any]:
        """Metadata with the context fields and every unnamed key folded in."""
        merged = dict(self.metadata or {})
        for name in (*CONTEXT_TEXT_FIELDS, *CONTEXT_LIST_FIELDS):
            value = getattr(self, name)
            if value is not None:
                merged[name] = value
        merged.update(self.model_extra or {})
        for name in CONTEXT_TEXT_FIELDS:
            value = merged.get(name)
            if value is not None and not isinstance(value, str):
                raise validation_error(name, f"must be a string, got {type(value).__name__}")
            if value is not None and not value.strip():
                raise validation_error(name, "must not be empty (leave it out instead)")
        for name in CONTEXT_LIST_FIELDS:
            value = merged.get(name)
            if value is None:
                continue
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise validation_error(name, "must be a list of strings")
            if not all(item.strip() for item in items):
                raise validation_error(name, "must not hold empty text (leave it out instead)")
        try:
            return _json_object(merged)
        except PydanticCustomError as exc:
            raise validation_error("metadata", str(exc)) from None


class TraceOut(Output):
    omit_when_none = frozenset({"screening"})

    trace_id: str
    project: str
    created_at: UtcDatetime
    model: str
    policy: str
    decision: Decision
    trust_score: float
    risk: float
    status_code: int | None
    metadata: dict[str, Any]
    screening: ScreeningOut | None = Field(
        None, description="The answer to a write: what screening masked and flagged."
    )


class TracePage(Output):
    count: int
    next: str | None
    previous: str | None
    results: list[TraceOut]


# --- plan -------------------------------------------------------------------------------------


class PlanInput(Input):
    n: Annotated[
        int, Field(ge=1, le=50, description="How many of the most recent traces to use.")
    ] = 5
    trust_threshold: Annotated[
        Unit, Field(description="Minimum trust score for mode 'auto' to inject.")
    ] = 0.75
    mode: Annotated[
        Mode, Field(description="auto: inject when trusted; force: always; dry_run: never.")
    ] = "auto"


class TrustSignals(Output):
    model_config = ConfigDict(extra="allow")

    p: float = Field(description="Coverage of what the next session needs, 0..1.")
    ue: float = Field(description="Epistemic uncertainty (divergence, vagueness), 0..1.")
    ua: float = Field(description="Aleatoric uncertainty (risk of the sources), 0..1.")
    total_uncertainty: float = Field(description="ue + ua, capped at 1.")


class PlanSignals(TrustSignals):
    omit_when_none = frozenset({"injection", "flagged"})

    traces_used: int
    fields_present: list[str]
    injection: float | None = Field(
        None,
        description="Present when the context holds instruction-like passages: their share of "
        "ua (0.6 each, at most 1). Such context is never injected in mode auto.",
    )
    flagged: list[FlaggedOut] | None = Field(
        None,
        description="The instruction-like passages of the context, with the field and rule; "
        "the passage itself is withheld.",
    )


class PlanContext(Output):
    active_project: str | None = None
    last_decision: str | None = None
    open_questions: list[str] = Field(default_factory=list)
    current_output: str | None = None
    recent_models: list[str] = Field(default_factory=list)


class _Scored(Output):
    trust_score: float

    @computed_field(description="The same as trust_score (C of the trust formula).")  # type: ignore[prop-decorator]
    @property
    def confidence(self) -> float | None:
        return self.trust_score


class PlanResult(_Scored):
    omit_when_none = frozenset(
        {"system_prompt", "flagged_reason", "would_inject", "review_id", "approved_by"}
    )

    status: Literal["injected", "flagged", "empty"]
    mode: Mode
    dry_run: bool
    project: str
    risk: float
    decision: Decision
    threshold: float
    signals: PlanSignals
    context: PlanContext
    system_prompt: str | None = Field(None, description="Present when status is 'injected'.")
    flagged_reason: str | None = Field(None, description="Present when flagged or empty.")
    would_inject: bool | None = Field(None, description="dry_run only: what auto would do.")
    trace_ids: list[str]
    generated_at: UtcDatetime
    injection_id: int = Field(description="Receipt of this decision in the injection log.")
    review_id: int | None = Field(
        None,
        description=(
            "A flagged plan in mode auto: the review that now holds it. An injected plan: the "
            "review whose approved context this is."
        ),
    )
    approved_by: str | None = Field(
        None, description="Present when the context delivered is one a reviewer approved."
    )
    quarantined: list[QuarantinedOut] = Field(
        default_factory=list, description=QUARANTINED_DESCRIPTION
    )


# --- session summaries ------------------------------------------------------------------------


class SaveInput(Input):
    summary: Annotated[
        str,
        Field(
            description=(
                "The session summary. Name the active project, the last decision, the current "
                "output, open questions and key files."
            )
        ),
    ]


class SaveResult(_Scored):
    trace_id: str
    project: str
    risk: float
    decision: Decision
    tokens: int
    signals: dict[str, Any] = Field(description="Why the summary scored as it did.")
    saved_at: UtcDatetime
    screening: ScreeningOut = Field(
        description="What screening masked in the summary before it was stored, and the "
        "instruction-like passages it flagged (a flagged summary is never loaded)."
    )


class LoadInput(Input):
    threshold: Annotated[
        Unit, Field(description="Minimum trust score of the summary to return.")
    ] = 0.45
    max_age_days: Annotated[
        int | None,
        Field(ge=1, le=3650, description="Refuse summaries older than this (default: setting)."),
    ] = None


class LoadResult(Output):
    omit_when_none = frozenset(
        {
            "reason",
            "rule",
            "trace_id",
            "summary",
            "trust_score",
            "confidence",
            "risk",
            "decision",
            "tokens",
            "signals",
            "saved_at",
            "system_prompt",
            "generated_at",
            "injection_id",
            "review_id",
            "approved_by",
        }
    )

    found: bool
    project: str
    threshold: float
    max_age_days: int
    reason: str | None = Field(None, description="found=false: why nothing was returned.")
    rule: Literal["none", "max_age", "threshold", "flagged"] | None = Field(
        None, description="found=false: the rule that refused."
    )
    trace_id: str | None = None
    summary: str | None = None
    trust_score: float | None = None
    risk: float | None = None
    decision: Decision | None = None
    tokens: int | None = None
    signals: dict[str, Any] | None = None
    saved_at: UtcDatetime | None = None
    system_prompt: str | None = Field(
        None, description="found=true: the inject-ready SESSION_CONTEXT block."
    )
    generated_at: UtcDatetime | None = None
    injection_id: int | None = None
    review_id: int | None = Field(
        None,
        description=(
            "rule threshold: the review that now holds the refused summary. found=true: the "
            "review whose approved summary this is."
        ),
    )
    approved_by: str | None = Field(
        None, description="Present when the summary delivered is one a reviewer approved."
    )

    @computed_field(description="The same as trust_score.")  # type: ignore[prop-decorator]
    @property
    def confidence(self) -> float | None:
        return self.trust_score
