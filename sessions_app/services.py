"""Session memory writes: recording traces, planning context, saving and loading summaries.

These functions are the one door for REST, MCP, the admin and commands. Each validates every
argument itself (an ApplicationError naming the field), so every caller gets the same errors,
and writes inside ``transaction.atomic`` after validation, so bad input writes nothing.
Every plan and every load that returns context appends its receipt to the injection log in the
same transaction.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from audit_app.services import injection_log_append
from memoryproject.errors import ApplicationError, ConflictError
from memoryproject.models import Project
from memoryproject.timeutil import iso, parse_aware_datetime, utcnow
from memoryproject.tokens import count_tokens
from sessions_app.domain.context import (
    REQUIRED_FIELDS,
    context_extract,
    context_score,
    system_prompt_render,
)
from sessions_app.domain.summary import summary_score
from sessions_app.domain.trust import DECISIONS, ESCALATE, action_gate, trust_score
from sessions_app.models import SESSION_SAVE_POLICY, SessionSummary, Trace
from sessions_app.selectors import trace_as_dict, traces_recent

MODES = ("auto", "force", "dry_run")
N_MIN, N_MAX = 1, 50
MAX_AGE_DAYS_MAX = 3650
TRACE_METADATA_MAX_BYTES = 65536
# A clock a little ahead on the client is fine; a trace from tomorrow is a mistake.
FUTURE_TOLERANCE = timedelta(minutes=5)

_TEXT_FIELDS = ("active_project", "last_decision", "current_output")
_LIST_FIELDS = ("open_questions", "key_files")
_TRACE_COLUMNS = (
    "trace_id",
    "created_at",
    "model",
    "policy",
    "decision",
    "trust_score",
    "risk",
    "status_code",
    "metadata",
)


# ---- argument checks (shared by every door) -------------------------------------------------


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApplicationError(
            f"{field}: must be an integer from {low} to {high}, got {value!r}", field=field
        )
    if not low <= value <= high:
        raise ApplicationError(f"{field}: must be from {low} to {high}, got {value}", field=field)
    return value


def _unit(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ApplicationError(f"{field}: must be a number from 0 to 1, got {value!r}", field=field)
    if not 0.0 <= value <= 1.0:
        raise ApplicationError(f"{field}: must be from 0 to 1, got {value}", field=field)
    return float(value)


def _string(value: Any, field: str, max_length: int, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ApplicationError(
            f"{field}: must be a string, got {type(value).__name__}", field=field
        )
    if required and not value.strip():
        raise ApplicationError(f"{field}: must not be empty", field=field)
    if len(value) > max_length:
        raise ApplicationError(
            f"{field}: must be at most {max_length} characters, got {len(value)}", field=field
        )
    if "\x00" in value:
        raise ApplicationError(f"{field}: must not contain NUL characters", field=field)
    return value


def _channel_client(channel: Any, client: Any) -> tuple[str, str]:
    return (
        _string(channel, "channel", 32, required=True).strip(),
        _string(client, "client", 200).strip(),
    )


# ---- traces ---------------------------------------------------------------------------------


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def _metadata(fields: dict[str, Any]) -> dict[str, Any]:
    metadata = fields.pop("metadata", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ApplicationError(
            f"metadata: must be a JSON object, got {type(metadata).__name__}", field="metadata"
        )
    metadata = dict(metadata)
    # The structured fields may come at the top level too; anything else the client sends is
    # kept in metadata as well, as the trace format has always allowed.
    for name in list(fields):
        if name not in _TRACE_COLUMNS:
            metadata[name] = fields.pop(name)
    for name in _TEXT_FIELDS:
        value = metadata.get(name)
        if value is not None and not isinstance(value, str):
            raise ApplicationError(
                f"{name}: must be a string, got {type(value).__name__}", field=name
            )
    for name in _LIST_FIELDS:
        value = metadata.get(name)
        if value is None or isinstance(value, str):
            continue
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ApplicationError(f"{name}: must be a list of strings", field=name)
    try:
        dumped = json.dumps(metadata, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ApplicationError(
            f"metadata: must be JSON-serialisable ({exc})", field="metadata"
        ) from exc
    if _has_nul(metadata):
        # PostgreSQL cannot store NUL in text or jsonb; refuse it on every database alike.
        raise ApplicationError("metadata: must not contain NUL characters", field="metadata")
    size = len(dumped.encode("utf-8"))
    if size > TRACE_METADATA_MAX_BYTES:
        raise ApplicationError(
            f"metadata: must be at most {TRACE_METADATA_MAX_BYTES} bytes of JSON, got {size}",
            field="metadata",
        )
    return metadata


def _trace_score(
    *, trust: Any, risk: Any, metadata: dict[str, Any], status_code: int | None
) -> tuple[float, float]:
    """The client's score when it sent one (the missing half is 1 minus the other); otherwise
    the trace scored on its own fields."""
    if trust is None and risk is None:
        present = sum(1 for name in REQUIRED_FIELDS if str(metadata.get(name) or "").strip())
        score = trust_score(
            p=present / len(REQUIRED_FIELDS),
            ue=0.0,
            ua=0.5 if status_code is not None and status_code >= 400 else 0.0,
        )
        return score.confidence, score.risk
    if trust is None:
        risk = _unit(risk, "risk")
        return round(1.0 - risk, 4), round(risk, 4)
    trust = _unit(trust, "trust_score")
    risk = round(1.0 - trust, 4) if risk is None else _unit(risk, "risk")
    return round(trust, 4), round(risk, 4)


def trace_record(*, project: Project, **fields: Any) -> dict[str, Any]:
    """Records one trace and answers it as stored.

    Fields: trace_id (UUID, optional), created_at (ISO-8601 with zone, default now), model,
    policy, decision (PASS|REFINE|ESCALATE), trust_score and risk (0..1), status_code,
    metadata (object), and the structured context fields active_project, last_decision,
    current_output, open_questions, key_files (top level or inside metadata). When the client
    sends no score, the trace is scored by the trust model on its own fields: p = share of the
    three required context fields it carries, Ua = 0.5 for a failed call (status_code >= 400).
    """
    fields = dict(fields)
    metadata = _metadata(fields)

    trace_id: uuid.UUID | None = None
    if fields.get("trace_id") not in (None, ""):
        raw = fields["trace_id"]
        try:
            trace_id = uuid.UUID(str(raw))
        except ValueError as exc:
            raise ApplicationError(f"trace_id: '{raw}' is not a UUID", field="trace_id") from exc

    now = utcnow()
    created_at = parse_aware_datetime(fields.get("created_at"), field="created_at") or now
    if created_at > now + FUTURE_TOLERANCE:
        raise ApplicationError(
            f"created_at: must not be in the future, got {iso(created_at)}", field="created_at"
        )
    model = _string(fields.get("model"), "model", 200).strip()
    policy = _string(fields.get("policy"), "policy", 64).strip()

    status_code = fields.get("status_code")
    if status_code is not None:
        status_code = _integer(status_code, "status_code", 100, 599)

    trust, risk = _trace_score(
        trust=fields.get("trust_score"),
        risk=fields.get("risk"),
        metadata=metadata,
        status_code=status_code,
    )

    decision = fields.get("decision")
    if decision in (None, ""):
        decision = action_gate(risk)
    elif decision not in DECISIONS:
        raise ApplicationError(
            f"decision: must be one of {', '.join(DECISIONS)}, got {decision!r}", field="decision"
        )

    with transaction.atomic():
        if trace_id is not None and Trace.objects.filter(trace_id=trace_id).exists():
            raise ConflictError(f"trace_id: trace '{trace_id}' already exists", field="trace_id")
        trace = Trace.objects.create(
            trace_id=trace_id or uuid.uuid4(),
            project=project,
            created_at=created_at,
            model=model,
            policy=policy,
            decision=decision,
            trust_score=trust,
            risk=risk,
            status_code=status_code,
            metadata=metadata,
        )
    return trace_as_dict(trace)


# ---- plan -----------------------------------------------------------------------------------


def _empty_reason(project: Project) -> str:
    return (
        f"No traces recorded for project '{project.slug}' yet, so there is no context to "
        "inject. Start by recording traces with POST /v1/traces (metadata: active_project, "
        "last_decision, current_output, open_questions, key_files), or save a session summary "
        "with POST /v1/sessions/save at the end of a session."
    )


def plan_context(
    *,
    project: Project,
    n: int = 5,
    trust_threshold: float = 0.75,
    mode: str = "auto",
    channel: str = "rest",
    client: str = "",
) -> dict[str, Any]:
    """Extracts, scores and (when trusted) injects the context of the n most recent traces.

    Statuses: ``injected`` (a system prompt is returned), ``flagged`` (not injected; the reason
    says why) and ``empty`` (no traces). mode ``auto`` injects when trust_score >=
    trust_threshold; ``force`` always injects; ``dry_run`` computes everything but never injects:
    its status is ``flagged`` with ``would_inject`` telling what auto would have done.
    Every call appends exactly one injection record, in the same transaction.
    """
    n = _integer(n, "n", N_MIN, N_MAX)
    threshold = _unit(trust_threshold, "trust_threshold")
    if mode not in MODES:
        raise ApplicationError(
            f"mode: must be one of {', '.join(MODES)}, got {mode!r}", field="mode"
        )
    channel, client = _channel_client(channel, client)

    with transaction.atomic():
        generated_at = utcnow()
        traces = traces_recent(project=project, n=n)
        context = context_extract(traces)
        score = context_score(context, traces)
        passes = score.confidence >= threshold
        system_prompt = ""
        flagged_reason = ""
        if not traces:
            status = "empty"
            decision = ESCALATE
            flagged_reason = _empty_reason(project)
        elif mode == "force" or (mode == "auto" and passes):
            status = "injected"
            decision = score.decision
            system_prompt = system_prompt_render(context, score, len(traces))
        else:
            status = "flagged"
            decision = score.decision
            flagged_reason = (
                f"Trust score {score.confidence:.4f} below threshold {threshold:.4f}. "
                "Manual review recommended."
            )
            if mode == "dry_run":
                flagged_reason = "Dry run: nothing injected. " + (
                    f"Trust score {score.confidence:.4f} meets threshold {threshold:.4f}; "
                    "mode auto would inject."
                    if passes
                    else flagged_reason
                )
        trace_ids = [t.trace_id for t in traces]
        record = injection_log_append(
            project=project,
            channel=channel,
            client=client,
            status=status,
            decision=decision,
            trust_score=score.confidence,
            threshold=threshold,
            mode=mode,
            trace_ids=trace_ids,
            system_prompt=system_prompt,
            generated_at=generated_at,
            source="plan",
        )

    body: dict[str, Any] = {
        "status": status,
        "mode": mode,
        "dry_run": mode == "dry_run",
        "project": project.slug,
        "trust_score": score.confidence,
        "confidence": score.confidence,
        "risk": score.risk,
        "decision": decision,
        "threshold": threshold,
        "signals": {
            **score.signals(),
            "traces_used": len(traces),
            "fields_present": context.present_fields(),
        },
        "context": context.as_dict(),
    }
    if status == "injected":
        body["system_prompt"] = system_prompt
    else:
        body["flagged_reason"] = flagged_reason
    if mode == "dry_run":
        body["would_inject"] = bool(traces) and passes
    body.update(
        {"trace_ids": trace_ids, "generated_at": iso(generated_at), "injection_id": record.pk}
    )
    return body


# ---- session summaries ----------------------------------------------------------------------


def session_save(*, project: Project, summary: str) -> dict[str, Any]:
    """Trust-scores a session summary and stores it (as a SessionSummary and its Trace).

    The score rewards the five things the next session needs (active project, last decision,
    current output, open questions, key files) and penalises vague, repetitive, hedging or short
    text; the signals explain it (see sessions_app.domain.summary).
    """
    limit = settings.SESSION_SUMMARY_MAX_CHARS
    if not isinstance(summary, str):
        raise ApplicationError(
            f"summary: must be a string, got {type(summary).__name__}", field="summary"
        )
    if not summary.strip():
        raise ApplicationError("summary: must not be empty", field="summary")
    if len(summary) > limit:
        raise ApplicationError(
            f"summary: must be at most {limit} characters, got {len(summary)}", field="summary"
        )
    if "\x00" in summary:
        raise ApplicationError("summary: must not contain NUL characters", field="summary")
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
        SessionSummary.objects.create(
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
    return {
        "trace_id": str(trace.trace_id),
        "project": project.slug,
        "trust_score": score.confidence,
        "confidence": score.confidence,
        "risk": score.risk,
        "decision": score.decision,
        "tokens": tokens,
        "signals": signals,
        "saved_at": iso(now),
    }


def session_block_render(summary: SessionSummary) -> str:
    return (
        f"SESSION_CONTEXT: (trust={summary.trust_score:.2f}, "
        f"saved {summary.created_at:%Y-%m-%d %H:%M})\n{summary.summary}"
    )


def _refusal(project: Project, threshold: float, max_age_days: int, cutoff: Any) -> dict[str, Any]:
    summaries = SessionSummary.objects.filter(project=project).order_by("-created_at", "-id")
    latest = summaries.select_related("trace").first()
    if latest is None:
        rule = "none"
        reason = (
            f"No session summary saved for project '{project.slug}' yet. Save one at the end "
            "of a session with POST /v1/sessions/save (or the save_session tool)."
        )
    else:
        fresh = summaries.filter(created_at__gte=cutoff).select_related("trace").first()
        if fresh is None:
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
    return {
        "found": False,
        "project": project.slug,
        "rule": rule,
        "reason": reason,
        "threshold": threshold,
        "max_age_days": max_age_days,
    }


def session_load(
    *,
    project: Project,
    threshold: float = 0.45,
    max_age_days: int | None = None,
    channel: str = "rest",
    client: str = "",
) -> dict[str, Any]:
    """The latest saved summary that passes ``threshold`` and is at most ``max_age_days`` old,
    with an inject-ready SESSION_CONTEXT block; otherwise found=false and the rule that refused.

    Returning context appends an injection record (source "load") in the same transaction.
    """
    threshold = _unit(threshold, "threshold")
    if max_age_days is None:
        max_age_days = settings.SESSION_MAX_AGE_DAYS
    max_age_days = _integer(max_age_days, "max_age_days", 1, MAX_AGE_DAYS_MAX)
    channel, client = _channel_client(channel, client)

    with transaction.atomic():
        generated_at = utcnow()
        cutoff = generated_at - timedelta(days=max_age_days)
        summary = (
            SessionSummary.objects.filter(
                project=project, created_at__gte=cutoff, trust_score__gte=threshold
            )
            .select_related("trace")
            .order_by("-created_at", "-id")
            .first()
        )
        if summary is None:
            return _refusal(project, threshold, max_age_days, cutoff)
        block = session_block_render(summary)
        record = injection_log_append(
            project=project,
            channel=channel,
            client=client,
            status="injected",
            decision=summary.decision,
            trust_score=summary.trust_score,
            threshold=threshold,
            mode="load",
            trace_ids=[str(summary.trace.trace_id)],
            system_prompt=block,
            generated_at=generated_at,
            source="load",
        )
    return {
        "found": True,
        "project": project.slug,
        "trace_id": str(summary.trace.trace_id),
        "summary": summary.summary,
        "trust_score": summary.trust_score,
        "confidence": summary.trust_score,
        "risk": summary.risk,
        "decision": summary.decision,
        "tokens": summary.tokens,
        "signals": summary.signals,
        "saved_at": iso(summary.created_at),
        "threshold": threshold,
        "max_age_days": max_age_days,
        "system_prompt": block,
        "generated_at": iso(generated_at),
        "injection_id": record.pk,
    }
