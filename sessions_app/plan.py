"""Planning context (``plan_context``): the recent traces' context extracted, scored and, when
trusted, injected; a context a reviewer approved delivered; a flagged one queued for review.
Every plan appends its receipt to the injection log in the same transaction."""

from __future__ import annotations

import json
from dataclasses import replace

from memoryproject.compliance import ReviewRecord, compliance
from memoryproject.contracts import Caller, takes
from memoryproject.domain.spotlight import WITHHELD, Quarantined, flag_reasons, reasons_sentence
from memoryproject.models import Project
from memoryproject.quarantine import item_hold, items_released
from memoryproject.screening import quarantined_out
from memoryproject.stored_contracts import review_stored
from memoryproject.timeutil import utcnow
from memoryproject.writes import write_transaction
from sessions_app.contracts import PlanContext, PlanInput, PlanResult, PlanSignals
from sessions_app.domain.context import (
    DELIVERED_FIELDS,
    ExtractedContext,
    TraceView,
    context_extract,
    context_score,
    context_screen,
    system_prompt_render,
    traces_sorted,
)
from sessions_app.domain.trust import ESCALATE, TrustScore
from sessions_app.selectors import traces_recent


def _empty_reason(project: Project) -> str:
    return (
        f"No traces recorded for project '{project.slug}' yet, so there is no context to "
        "inject. Start by recording traces with POST /v1/traces (metadata: active_project, "
        "last_decision, current_output, open_questions, key_files), or save a session summary "
        "with POST /v1/sessions/save at the end of a session."
    )


def _plan_passes(params: PlanInput, score: TrustScore, context: ExtractedContext) -> bool:
    """What mode auto requires: the threshold met and no instruction-like passage."""
    return score.confidence >= params.trust_threshold and not context.flagged


def _plan_verdict(
    *, params: PlanInput, score: TrustScore, has_traces: bool, context: ExtractedContext
) -> tuple[str, str, str]:
    """(status, decision, flagged_reason) of a plan: injected, flagged or empty."""
    passes = _plan_passes(params, score, context)
    if not has_traces:
        return "empty", ESCALATE, ""
    if params.mode == "force" or (params.mode == "auto" and passes):
        return "injected", score.decision, ""
    below = (
        f"Trust score {score.confidence:.4f} below threshold {params.trust_threshold:.4f}. "
        "Manual review recommended."
    )
    if context.flagged:
        named = "; ".join(flag_reasons(context.flagged))
        below = f"Instruction-like content is never injected automatically ({named}). {below}"
    if context.quarantined:
        below = f"{below} {reasons_sentence(context.quarantined)}"
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
    # Read and computed before the write transaction: on SQLite it holds the database's one
    # write lock, so it spans only the claim, the receipt and the review.
    generated_at = utcnow()
    traces = traces_recent(project=project, n=params.n)
    kept, held = _traces_sorted(project, traces)
    context = replace(context_screen(context_extract(kept)), quarantined=held)
    score = context_score(context, kept)
    status, decision, flagged_reason = _plan_verdict(
        params=params, score=score, has_traces=bool(traces), context=context
    )
    if status == "empty":
        flagged_reason = _empty_reason(project)
    system_prompt = system_prompt_render(context, score, len(kept)) if status == "injected" else ""
    trace_ids = [t.trace_id for t in kept]
    with write_transaction():
        approved = (
            compliance().review_claim(project=project, source="plan")
            if params.mode != "dry_run"
            else None
        )
        if approved is not None:
            return _plan_approved(project=project, params=params, caller=caller, review=approved)
        _traces_held(project, traces, held)
        record = compliance().receipt_append(
            project=project,
            **caller.receipt_fields(),
            status=status,
            decision=decision,
            trust_score=score.confidence,
            threshold=params.trust_threshold,
            mode=params.mode,
            trace_ids=trace_ids,
            system_prompt=system_prompt,
            generated_at=generated_at,
            source="plan",
            request=params.model_dump(mode="json") | _held_request(held),
            items=[{"kind": "trace", "id": t.trace_id, "sha256": t.sha256} for t in kept],
            item_rows={("trace", t.trace_id): t.row_id for t in kept if t.row_id is not None},
        )
        review = (
            _plan_review(project, params, record.pk, flagged_reason, score, context, kept)
            if status == "flagged" and params.mode == "auto"
            else None
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
        signals=_plan_signals(score, context, len(kept)),
        context=PlanContext(**context.as_dict()),
        quarantined=[quarantined_out(q) for q in held],
        system_prompt=system_prompt if status == "injected" else None,
        flagged_reason=flagged_reason if status != "injected" else None,
        would_inject=(
            bool(kept) and _plan_passes(params, score, context)
            if params.mode == "dry_run"
            else None
        ),
        trace_ids=trace_ids,
        generated_at=generated_at,
        injection_id=record.pk,
        review_id=review.pk if review is not None else None,
    )


def _traces_sorted(
    project: Project, traces: list[TraceView]
) -> tuple[list[TraceView], tuple[Quarantined, ...]]:
    """The traces a plan may deliver and the flagged ones it holds back, a flagged trace a
    reviewer released being delivered (one query, only when a trace is flagged)."""
    kept, held = traces_sorted(traces)
    if not held:
        return kept, held
    shas = {t.trace_id: t.sha256 for t in traces}
    released = items_released(project=project, items=[("trace", q.id, shas[q.id]) for q in held])
    if not released:
        return kept, held
    return traces_sorted(traces, frozenset(item_id for _, item_id in released))


def _traces_held(project: Project, traces: list[TraceView], held: tuple[Quarantined, ...]) -> None:
    """Queues every quarantined trace for review (once each), in the plan's transaction."""
    by_id = {t.trace_id: t for t in traces}
    for item in held:
        trace = by_id[item.id]
        shown = {name: trace.metadata.get(name) for name in DELIVERED_FIELDS}
        item_hold(
            project=project,
            kind="trace",
            item_id=item.id,
            sha256=trace.sha256,
            reasons=item.reasons,
            text=json.dumps({"model": trace.model, **shown}, ensure_ascii=False, indent=2),
        )


def _held_request(held: tuple[Quarantined, ...]) -> dict[str, object]:
    """What a receipt's request records of the traces a plan held back: their ids."""
    return {"quarantined": [item.id for item in held]} if held else {}


def _plan_review(
    project: Project,
    params: PlanInput,
    injection_id: int,
    reason: str,
    score: TrustScore,
    context: ExtractedContext,
    traces: list[TraceView],
) -> ReviewRecord:
    """Queues a plan flagged in mode auto for review, with the text it would have injected."""
    return compliance().review_open(
        project=project,
        source="plan",
        reason=reason,
        trust_score=score.confidence,
        risk=score.risk,
        threshold=params.trust_threshold,
        decision=score.decision,
        signals=_plan_signals(score, context, len(traces)).model_dump(mode="json"),
        context=context.as_dict(),
        trace_ids=[t.trace_id for t in traces],
        items=[{"kind": "trace", "id": t.trace_id, "sha256": t.sha256} for t in traces],
        text=system_prompt_render(context, score, len(traces)),
        flagged_injection_id=injection_id,
    )


def _plan_approved(
    *, project: Project, params: PlanInput, caller: Caller, review: ReviewRecord
) -> PlanResult:
    """Delivers the context a reviewer approved (claimed by ``review_claim``), receipted like
    any injection and marked with the review and the reviewer."""
    generated_at = utcnow()
    record = compliance().receipt_append(
        project=project,
        **caller.receipt_fields(),
        status="injected",
        decision=review.decision,
        trust_score=review.trust_score,
        threshold=review.threshold,
        mode="approved",
        trace_ids=review.trace_ids,
        system_prompt=review.text,
        generated_at=generated_at,
        source="plan",
        request={
            **params.model_dump(mode="json"),
            "review_id": review.pk,
            "approved_by": review.decided_by,
        },
        items=review.items,
    )
    compliance().review_delivered(review=review, injection_id=record.pk)
    return PlanResult(
        status="injected",
        mode=params.mode,
        dry_run=False,
        project=project.slug,
        trust_score=review.trust_score,
        risk=review.risk,
        decision=review.decision,  # type: ignore[arg-type]
        threshold=review.threshold,
        signals=review_stored(review.signals, PlanSignals, what="signals"),
        context=review_stored(review.context, PlanContext, what="context"),
        system_prompt=review.text,
        trace_ids=list(review.trace_ids),
        generated_at=generated_at,
        injection_id=record.pk,
        review_id=review.pk,
        approved_by=review.decided_by,
    )


def _plan_signals(score: TrustScore, context: ExtractedContext, used: int) -> PlanSignals:
    flagged = [f.as_dict() | {"passage": WITHHELD} for f in context.flagged] or None
    return PlanSignals(
        **score.signals(),
        traces_used=used,
        fields_present=context.present_fields(),
        flagged=flagged,  # type: ignore[arg-type]
    )
