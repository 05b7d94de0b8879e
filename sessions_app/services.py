"""Session memory writes: recording traces, planning context, saving and loading summaries.

These functions are the one door for REST, MCP, the admin and commands. Each validates every
argument itself (an ApplicationError naming the field), so every caller gets the same errors,
and writes inside ``transaction.atomic`` after validation, so bad input writes nothing.
Every plan and every load that returns context appends its receipt to the injection log in the
same transaction.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from audit_app.services import injection_log_append
from memoryproject.contracts import Caller, takes
from memoryproject.errors import ConflictError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import iso, utcnow
from memoryproject.tokens import count_tokens
from sessions_app.contracts import (
    LoadInput,
    LoadResult,
    PlanContext,
    PlanInput,
    PlanResult,
    PlanSignals,
    SaveInput,
    SaveResult,
    TraceInput,
    TraceOut,
)
from sessions_app.domain.context import (
    REQUIRED_FIELDS,
    ExtractedContext,
    context_extract,
    context_score,
    system_prompt_render,
)
from sessions_app.domain.summary import summary_score
from sessions_app.domain.trust import ESCALATE, TrustScore, action_gate, trust_score
from sessions_app.models import SESSION_SAVE_POLICY, SessionSummary, Trace
from sessions_app.selectors import (
    session_summary_latest,
    summary_fields,
    summary_sha256,
    trace_view,
    traces_recent,
)

# A clock a little ahead on the client is fine; a trace from tomorrow is a mistake.
FUTURE_TOLERANCE = timedelta(minutes=5)


# ---- traces ---------------------------------------------------------------------------------


def _trace_score(params: TraceInput, metadata: dict[str, object]) -> tuple[float, float]:
    """The client's score when it sent one (the missing half is 1 minus the other); otherwise
    the trace scored on its own fields."""
    trust, risk = params.trust_score, params.risk
    if trust is None and risk is None:
        present = sum(1 for name in REQUIRED_FIELDS if str(metadata.get(name) or "").strip())
        failed = params.status_code is not None and params.status_code >= 400
        score = trust_score(p=present / len(REQUIRED_FIELDS), ue=0.0, ua=0.5 if failed else 0.0)
        return score.confidence, score.risk
    if trust is None:
        assert risk is not None
        return round(1.0 - risk, 4), round(risk, 4)
    risk = round(1.0 - trust, 4) if risk is None else risk
    return round(trust, 4), round(risk, 4)


@takes(TraceInput)
def trace_record(*, project: Project, params: TraceInput) -> TraceOut:
    """Records one trace and answers it as stored.

    The structured context fields (active_project, last_decision, current_output,
    open_questions, key_files) may come at the top level or inside metadata; any other key the
    client sends is kept in metadata too. When the client sends no score, the trace is scored
    by the trust model on its own fields: p = share of the three required context fields it
    carries, Ua = 0.5 for a failed call (status_code >= 400).
    """
    metadata = params.merged_metadata()
    now = utcnow()
    created_at = params.created_at or now
    if created_at > now + FUTURE_TOLERANCE:
        raise validation_error("created_at", f"must not be in the future, got {iso(created_at)}")
    trust, risk = _trace_score(params, metadata)
    trace_id = uuid.UUID(params.trace_id) if params.trace_id else uuid.uuid4()
    with transaction.atomic():
        if Trace.objects.filter(trace_id=trace_id).exists():
            raise ConflictError(f"trace_id: trace '{trace_id}' already exists", field="trace_id")
        trace = Trace.objects.create(
            trace_id=trace_id,
            project=project,
            created_at=created_at,
            model=(params.model or "").strip(),
            policy=(params.policy or "").strip(),
            decision=params.decision or action_gate(risk),
            trust_score=trust,
            risk=risk,
            status_code=params.status_code,
            metadata=metadata,
        )
    return trace_view(trace)


# ---- plan -----------------------------------------------------------------------------------


def _empty_reason(project: Project) -> str:
    return (
        f"No traces recorded for project '{project.slug}' yet, so there is no context to "
        "inject. Start by recording traces with POST /v1/traces (metadata: active_project, "
        "last_decision, current_output, open_questions, key_files), or save a session summary "
        "with POST /v1/sessions/save at the end of a session."
    )


def _plan_verdict(
    *, params: PlanInput, score: TrustScore, has_traces: bool
) -> tuple[str, str, str]:
    """(status, decision, flagged_reason) of a plan: injected, flagged or empty."""
    passes = score.confidence >= params.trust_threshold
    if not has_traces:
        return "empty", ESCALATE, ""
    if params.mode == "force" or (params.mode == "auto" and passes):
        return "injected", score.decision, ""
    below = (
        f"Trust score {score.confidence:.4f} below threshold {params.trust_threshold:.4f}. "
        "Manual review recommended."
    )
    if params.mode != "dry_run":
        return "flagged", score.decision, below
    meets = (
        f"Trust score {score.confidence:.4f} meets threshold {params.trust_threshold:.4f}; "
        "mode auto would inject."
    )
    return "flagged", score.decision, "Dry run: nothing injected. " + (meets if passes else below)


@takes(PlanInput)
def plan_context(*, project: Project, params: PlanInput, caller: Caller) -> PlanResult:
    """Extracts, scores and (when trusted) injects the context of the n most recent traces.

    Statuses: ``injected`` (a system prompt is returned), ``flagged`` (not injected; the reason
    says why) and ``empty`` (no traces). mode ``auto`` injects when trust_score >=
    trust_threshold; ``force`` always injects; ``dry_run`` computes everything but never injects:
    its status is ``flagged`` with ``would_inject`` telling what auto would have done.
    Every call appends exactly one injection record, in the same transaction.
    """
    with transaction.atomic():
        generated_at = utcnow()
        traces = traces_recent(project=project, n=params.n)
        context = context_extract(traces)
        score = context_score(context, traces)
        status, decision, flagged_reason = _plan_verdict(
            params=params, score=score, has_traces=bool(traces)
        )
        if status == "empty":
            flagged_reason = _empty_reason(project)
        system_prompt = (
            system_prompt_render(context, score, len(traces)) if status == "injected" else ""
        )
        trace_ids = [t.trace_id for t in traces]
        record = injection_log_append(
            project=project,
            channel=caller.channel,
            client=caller.client,
            status=status,
            decision=decision,
            trust_score=score.confidence,
            threshold=params.trust_threshold,
            mode=params.mode,
            trace_ids=trace_ids,
            system_prompt=system_prompt,
            generated_at=generated_at,
            source="plan",
            request=params.model_dump(mode="json"),
            items=[{"kind": "trace", "id": t.trace_id, "sha256": t.sha256} for t in traces],
        )
    return PlanResult(
        status=status,  # type: ignore[arg-type]
        mode=params.mode,
        dry_run=params.mode == "dry_run",
        project=project.slug,
        trust_score=score.confidence,
        risk=score.risk,
        decision=decision,  # type: ignore[arg-type]
        threshold=params.trust_threshold,
        signals=_plan_signals(score, context, len(traces)),
        context=PlanContext(**context.as_dict()),
        system_prompt=system_prompt if status == "injected" else None,
        flagged_reason=flagged_reason if status != "injected" else None,
        would_inject=(
            bool(traces) and score.confidence >= params.trust_threshold
            if params.mode == "dry_run"
            else None
        ),
        trace_ids=trace_ids,
        generated_at=generated_at,
        injection_id=record.pk,
    )


def _plan_signals(score: TrustScore, context: ExtractedContext, used: int) -> PlanSignals:
    return PlanSignals(**score.signals(), traces_used=used, fields_present=context.present_fields())


# ---- session summaries ----------------------------------------------------------------------


@takes(SaveInput)
def session_save(*, project: Project, params: SaveInput) -> SaveResult:
    """Trust-scores a session summary and stores it (as a SessionSummary and its Trace).

    The score rewards the five things the next session needs (active project, last decision,
    current output, open questions, key files) and penalises vague, repetitive, hedging or short
    text; the signals explain it (see sessions_app.domain.summary). The length limit is the
    ``SESSION_SUMMARY_MAX_CHARS`` setting.
    """
    summary, limit = params.summary, settings.SESSION_SUMMARY_MAX_CHARS
    if not summary.strip():
        raise validation_error("summary", "must not be empty")
    if len(summary) > limit:
        raise validation_error("summary", f"must be at most {limit} characters, got {len(summary)}")
    if "\x00" in summary:
        raise validation_error("summary", "must not contain NUL characters")
    text = summary.strip()
    scored = summary_score(text)
    score = scored.score
    tokens = count_tokens(text)
    signals = scored.signals()
    now = utcnow()
    with transaction.atomic():
        trace = Trace.objects.create(
            project=project,
            created_at=now,
            policy=SESSION_SAVE_POLICY,
            decision=score.decision,
            trust_score=score.confidence,
            risk=score.risk,
            metadata={**scored.sections, "summary_chars": len(text), "summary_tokens": tokens},
        )
        saved = SessionSummary.objects.create(
            project=project,
            trace=trace,
            summary=text,
            tokens=tokens,
            signals=signals,
            trust_score=score.confidence,
            risk=score.risk,
            decision=score.decision,
            created_at=now,
        )
    return SaveResult(project=project.slug, **summary_fields(saved))


def session_block_render(summary: SessionSummary) -> str:
    return (
        f"SESSION_CONTEXT: (trust={summary.trust_score:.2f}, "
        f"saved {summary.created_at:%Y-%m-%d %H:%M})\n{summary.summary}"
    )


def _refusal(project: Project, threshold: float, max_age_days: int, cutoff: datetime) -> LoadResult:
    latest = session_summary_latest(project=project)
    fresh = session_summary_latest(project=project, since=cutoff) if latest else None
    if latest is None:
        rule = "none"
        reason = (
            f"No session summary saved for project '{project.slug}' yet. Save one at the end "
            "of a session with POST /v1/sessions/save (or the save_session tool)."
        )
    elif fresh is None:
        age = (utcnow() - latest.created_at).days
        rule = "max_age"
        reason = (
            f"max_age: the latest summary (trace {latest.trace.trace_id}) was saved "
            f"{latest.created_at:%Y-%m-%d %H:%M} UTC, {age} days ago, older than "
            f"max_age_days={max_age_days}; stale context is never returned."
        )
    else:
        rule = "threshold"
        reason = (
            f"threshold: the latest summary within max_age_days={max_age_days} (trace "
            f"{fresh.trace.trace_id}) has trust score {fresh.trust_score:.4f}, below the "
            f"threshold {threshold:.4f}, and no fresher summary passes; low-trust context "
            "is never returned."
        )
    return LoadResult(
        found=False,
        project=project.slug,
        rule=rule,  # type: ignore[arg-type]
        reason=reason,
        threshold=threshold,
        max_age_days=max_age_days,
    )


@takes(LoadInput)
def session_load(*, project: Project, params: LoadInput, caller: Caller) -> LoadResult:
    """The latest saved summary that passes ``threshold`` and is at most ``max_age_days`` old
    (default: the ``SESSION_MAX_AGE_DAYS`` setting), with an inject-ready SESSION_CONTEXT block;
    otherwise found=false and the rule that refused.

    Returning context appends an injection record (source "load") in the same transaction.
    """
    threshold = params.threshold
    max_age_days = params.max_age_days or settings.SESSION_MAX_AGE_DAYS
    with transaction.atomic():
        generated_at = utcnow()
        cutoff = generated_at - timedelta(days=max_age_days)
        summary = session_summary_latest(project=project, since=cutoff, min_trust=threshold)
        if summary is None:
            return _refusal(project, threshold, max_age_days, cutoff)
        block = session_block_render(summary)
        record = injection_log_append(
            project=project,
            channel=caller.channel,
            client=caller.client,
            status="injected",
            decision=summary.decision,
            trust_score=summary.trust_score,
            threshold=threshold,
            mode="load",
            trace_ids=[str(summary.trace.trace_id)],
            system_prompt=block,
            generated_at=generated_at,
            source="load",
            request={"threshold": threshold, "max_age_days": max_age_days},
            items=[
                {
                    "kind": "summary",
                    "id": str(summary.trace.trace_id),
                    "sha256": summary_sha256(summary),
                }
            ],
        )
    return LoadResult(
        found=True,
        project=project.slug,
        summary=summary.summary,
        **summary_fields(summary),
        threshold=threshold,
        max_age_days=max_age_days,
        system_prompt=block,
        generated_at=generated_at,
        injection_id=record.pk,
    )
