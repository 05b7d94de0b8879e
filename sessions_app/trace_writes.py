"""Recording traces (``trace_record``): each validated, scored by the trust model when the
client sends no score, screened (secrets masked, instruction-like text flagged) and written in
its turn (``memoryproject/writes.py``) after validation, so bad input writes nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta

from memoryproject.contracts import takes
from memoryproject.domain.screening import Screening
from memoryproject.errors import ConflictError, validation_error
from memoryproject.models import Project
from memoryproject.quarantine import record_hold
from memoryproject.screening import screening_out, write_screened
from memoryproject.timeutil import iso, utcnow
from memoryproject.writes import write_transaction
from sessions_app.contracts import TraceInput, TraceOut
from sessions_app.domain.context import REQUIRED_FIELDS, TraceView, trace_flags
from sessions_app.domain.trust import action_gate, trust_score
from sessions_app.models import Trace
from sessions_app.selectors import trace_sha256, trace_view

# A clock a little ahead on the client is fine; a trace from tomorrow is a mistake.
FUTURE_TOLERANCE = timedelta(minutes=5)


def _trace_score(
    params: TraceInput, metadata: dict[str, object], *, injection: float
) -> tuple[float, float]:
    """The client's score when it sent one (kept to 4 decimals; risk is 1 minus the trust
    score, which the contract checked when both came); otherwise the trace scored on its own
    fields, instruction-like content counting into Ua."""
    trust, risk = params.trust_score, params.risk
    if trust is None and risk is None:
        present = sum(1 for name in REQUIRED_FIELDS if str(metadata.get(name) or "").strip())
        failed = params.status_code is not None and params.status_code >= 400
        score = trust_score(
            p=present / len(REQUIRED_FIELDS),
            ue=0.0,
            ua=0.5 if failed else 0.0,
            injection=injection,
        )
        return score.confidence, score.risk
    if trust is None:
        assert risk is not None
        return round(1.0 - round(risk, 4), 4), round(risk, 4)
    return round(trust, 4), round(1.0 - round(trust, 4), 4)


def _trace_decision(params: TraceInput, risk: float) -> str:
    """The gate of the stored risk; a decision the client sends must be that gate."""
    gate = action_gate(risk)
    if params.decision is not None and params.decision != gate:
        raise validation_error(
            "decision",
            f"must be {gate}, the gate of risk {risk:.4f} (PASS below 0.25, REFINE below 0.60, "
            f"else ESCALATE), got {params.decision}",
        )
    return gate


def _trace_screen(params: TraceInput, metadata: dict[str, object]) -> Screening:
    """Masks the secrets in every text field and in metadata's keys, values and lists (files,
    key_files, open_questions...); flags instruction-like text."""
    model, policy = (params.model or "").strip(), (params.policy or "").strip()
    return write_screened({"model": model, "policy": policy, "metadata": metadata})


@takes(TraceInput)
def trace_record(*, project: Project, params: TraceInput) -> TraceOut:
    """Records one trace and answers it as stored.

    The structured context fields (active_project, last_decision, current_output,
    open_questions, key_files) may come at the top level or inside metadata; any other key the
    client sends is kept in metadata too. When the client sends no score, the trace is scored
    by the trust model on its own fields: p = share of the three required context fields it
    carries, Ua = 0.5 for a failed call (status_code >= 400) plus the injection signal of
    instruction-like passages. A sent ``decision`` must be the gate of the risk. Secrets are
    masked before anything is stored; the answer's ``screening`` says what was masked and
    flagged.
    """
    screened = _trace_screen(params, params.merged_metadata())
    metadata = screened.fields["metadata"]
    now = utcnow()
    created_at = params.created_at or now
    if created_at > now + FUTURE_TOLERANCE:
        raise validation_error("created_at", f"must not be in the future, got {iso(created_at)}")
    trust, risk = _trace_score(params, metadata, injection=screened.injection)
    decision = _trace_decision(params, risk)
    trace_id = uuid.UUID(params.trace_id) if params.trace_id else uuid.uuid4()
    with write_transaction():
        # Only the project's own traces: another project's ids must not show (unique per project).
        if Trace.objects.filter(project=project, trace_id=trace_id).exists():
            raise ConflictError(f"trace_id: trace '{trace_id}' already exists", field="trace_id")
        trace = Trace.objects.create(
            trace_id=trace_id,
            project=project,
            created_at=created_at,
            model=screened.fields["model"][: Trace._meta.get_field("model").max_length],
            policy=screened.fields["policy"][: Trace._meta.get_field("policy").max_length],
            decision=decision,
            trust_score=trust,
            risk=risk,
            status_code=params.status_code,
            metadata=metadata,
        )
        view = trace_view(trace, screening=screening_out(screened))
        _trace_hold(project, trace, view)
    return view


def _trace_hold(project: Project, trace: Trace, view: TraceOut) -> None:
    """Queues a trace whose delivered fields screening flags (what a plan would quarantine)."""
    sha = trace_sha256(trace)
    delivered = TraceView(
        trace_id=str(trace.trace_id),
        model=trace.model,
        trust_score=trace.trust_score,
        risk=trace.risk,
        metadata=trace.metadata,
        sha256=sha,
    )
    flags = trace_flags(delivered)
    if flags:
        record = {k: v for k, v in view.as_json().items() if k != "screening"}
        record_hold(
            project=project,
            kind="trace",
            item_id=delivered.trace_id,
            sha256=sha,
            flags=flags,
            record=record,
        )
