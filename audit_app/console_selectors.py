"""Reads for the audit console (the admin's injection log): the chain's status as the banner
shows it, and "what did the agent get?" for one delivery record: the text as delivered, the
scores it was given and every source it came from, each compared with what it is now.

Nothing here is cached: the banner verifies the chain on every request (a status that could
lie is worse than a slow page), but only its newest part, in a bounded number of queries and
rows whatever the length of the log: from the latest signed checkpoint to the head, or the
newest ``RECENT_WINDOW`` records when no checkpoint covers the rest. The banner says exactly
which records it checked; the whole log is verified by ``manage.py injection_log_verify`` (and
before every checkpoint is signed). The sources are read in one query per kind, whatever the
number of items a record names."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils.timesince import timesince

from audit_app.models import ErasedText, InjectionRecord
from audit_app.receipt_selectors import source_compared
from audit_app.receipt_sources import uuids_parsed
from audit_app.selectors import RECENT_WINDOW, injection_log_verify_recent
from graph_app.models import ChangeAction, Episode, GraphChange, TemporalFact
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import utcnow
from sessions_app.models import SessionSummary, Trace
from sessions_app.selectors import summary_sha256, trace_sha256


@dataclass(frozen=True)
class CheckpointStatus:
    id: int | None
    seq: int
    hash: str
    created_at: datetime
    age: timedelta
    signature_ok: bool
    consistent: bool
    reason: str


@dataclass(frozen=True)
class ChainStatus:
    """The banner: verified or broken (at which seq, why), what exactly was checked (``scope``:
    "full", "checkpoint" or "window"; seqs ``first_seq``..``head_seq``), the head, the last
    checkpoint and the last full verification on record."""

    verified: bool
    checked: int
    head_seq: int
    head_hash: str
    broken_seq: int | None = None
    broken_reason: str = ""
    checkpoint: CheckpointStatus | None = None
    warnings: list[str] = field(default_factory=list)
    error: str = ""
    scope: str = "full"
    first_seq: int = 1
    unverified: int = 0
    start: str = "genesis"
    # The log held to the witness outside the database: verified, failed or unanchored.
    witness_state: str = "unanchored"
    witness_problems: list[str] = field(default_factory=list)
    witness_since: str = ""

    @property
    def witness_summary(self) -> str:
        if self.witness_state == "verified":
            since = f" (held to {self.witness_since})" if self.witness_since else ""
            return f"verified: the database holds everything the witness signed{since}"
        head = "NOT VERIFIED" if self.witness_state == "failed" else "UNANCHORED"
        return f"{head}: {'; '.join(self.witness_problems)}"

    @property
    def checked_range(self) -> str:
        """What this check covered, in words (never more than was read)."""
        if self.error:
            return "nothing was checked"
        span = f"seq {self.first_seq} to head seq {self.head_seq}"
        if self.scope == "checkpoint" and self.checkpoint is not None:
            c = self.checkpoint
            verb, count = ("verified", "checked") if self.verified else ("checked", "verified")
            return (
                f"{verb} from checkpoint #{c.id} (seq {c.seq}, {_age(c.age)} old) to head "
                f"seq {self.head_seq}: {self.checked:,} records {count}"
            )
        if self.scope == "window":
            return (
                f"last {RECENT_WINDOW:,} records checked ({span}); the {self.unverified:,} "
                "records before them were not checked here"
            )
        if not self.verified:
            return (
                f"checked from {self.start} to head seq {self.head_seq}: {self.checked:,} "
                "records verified"
            )
        return (
            f"all {self.checked:,} records checked, from {self.start} to head seq {self.head_seq}"
        )

    @property
    def full_verification(self) -> str:
        """When the whole log was last verified, as far as the database records it: every
        checkpoint is signed only after a full verification passed."""
        c = self.checkpoint
        if c is not None and c.signature_ok:
            return (
                f"passed through seq {c.seq} when checkpoint #{c.id} was signed, "
                f"{c.created_at:%Y-%m-%d %H:%M:%S} UTC ({_age(c.age)} ago)"
            )
        return "none on record: run manage.py injection_log_verify (cron)"

    @property
    def advice(self) -> str:
        if self.scope != "window":
            return ""
        if self.checkpoint is not None and self.checkpoint.signature_ok:
            return "create a newer checkpoint with manage.py audit_checkpoint"
        return "create a checkpoint with manage.py audit_checkpoint"


def _age(age: timedelta) -> str:
    now = utcnow()
    return timesince(now - age, now)


def chain_status() -> ChainStatus:
    """Verifies the newest part of the injection log now (see ``injection_log_verify_recent``),
    against its head and the latest stored checkpoint."""
    try:
        recent = injection_log_verify_recent()
    except ApplicationError as exc:
        return ChainStatus(verified=False, checked=0, head_seq=0, head_hash="", error=exc.message)
    result = recent.verification
    now = utcnow()
    stored = [c for c in result.checkpoints if c.source == "stored"]
    checkpoint = None
    if stored:
        c = stored[0]
        checkpoint = CheckpointStatus(
            id=c.id,
            seq=c.seq,
            hash=c.hash,
            created_at=c.created_at,
            age=now - c.created_at,
            signature_ok=c.signature_ok,
            consistent=c.consistent,
            reason=c.reason,
        )
    broken, anchor = result.first_broken, result.anchor
    witnessed = result.witness
    reason = broken.reason if broken else ""
    if not result.ok and not reason:
        # Not verified without a broken record: say why (the witness, dropped triggers).
        reason = "; ".join([*(witnessed.problems if witnessed else []), *result.warnings])
    return ChainStatus(
        verified=result.ok,
        checked=result.checked,
        head_seq=result.head.seq if result.head else 0,
        head_hash=result.head.hash if result.head else "",
        broken_seq=broken.seq if broken else None,
        broken_reason=reason,
        witness_state=witnessed.state if witnessed else "unanchored",
        witness_problems=list(witnessed.problems) if witnessed else [],
        witness_since=(witnessed.since or "") if witnessed else "",
        checkpoint=checkpoint,
        warnings=list(result.warnings),
        scope=recent.scope,
        first_seq=recent.first_seq,
        unverified=recent.unverified,
        start=(
            "genesis"
            if anchor is None or anchor.kind == "genesis"
            else f"the purge anchor at seq {anchor.seq}"
        ),
    )


@dataclass(frozen=True)
class SourceState:
    """One item a record delivered, then and now."""

    kind: str
    id: str
    sha256: str
    sha256_now: str | None
    changed_since: bool
    erased: bool
    exists: bool
    label: str
    # The admin page of the row ("" when the row is gone): (app_label, model_name, pk).
    admin: tuple[str, str, str] | None
    scores: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Delivery:
    """What the agent got from one record."""

    record: InjectionRecord
    text: str
    text_erased: bool
    signals: dict[str, Any]
    sources: list[SourceState]


def _session_states(
    items: list[dict[str, str]], project_id: int | None
) -> dict[tuple[str, str], dict[str, Any]]:
    # A trace id is unique only within its project: look in the record's own project.
    in_project: dict[str, Any] = {"project_id": project_id}
    wanted = {kind: [i["id"] for i in items if i["kind"] == kind] for kind in ("trace", "summary")}
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for trace in Trace.objects.filter(trace_id__in=uuids_parsed(wanted["trace"]), **in_project):
        key = str(trace.trace_id)
        found[("trace", key)] = _state(
            "trace",
            key,
            sha_now=trace_sha256(trace),
            erased=trace.metadata == {"erased": True},
            label=f"trace {key} · {trace.model or 'no model'} · {trace.decision}",
            admin=("sessions_app", "trace", str(trace.pk)),
            scores={"trust_score": trace.trust_score, "risk": trace.risk},
        )
    summaries = SessionSummary.objects.select_related("trace", "project").filter(
        trace__trace_id__in=uuids_parsed(wanted["summary"]), **in_project
    )
    for summary in summaries:
        key = str(summary.trace.trace_id)
        found[("summary", key)] = _state(
            "summary",
            key,
            sha_now=summary_sha256(summary),
            erased=summary.trace.metadata == {"erased": True},
            label=f"saved summary of trace {key}",
            admin=("sessions_app", "sessionsummary", str(summary.pk)),
            scores={"trust_score": summary.trust_score, "risk": summary.risk, **summary.signals},
        )
    return found


def _graph_states(items: list[dict[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, model in (("fact", TemporalFact), ("episode", Episode)):
        wanted = [i["id"] for i in items if i["kind"] == kind]
        if not wanted:
            continue
        erased = set(
            GraphChange.objects.filter(
                action=ChangeAction.ERASED, record_type=kind, record_id__in=wanted
            ).values_list("record_id", flat=True)
        )
        # A fact's title names its subject: joined, not read per row.
        rows = model.objects.filter(pk__in=wanted).select_related(
            *(["subject"] if model is TemporalFact else [])
        )
        for row in rows:
            found[(kind, row.pk)] = _state(
                kind,
                row.pk,
                sha_now=row.sha256,
                erased=row.pk in erased,
                label=str(row),
                admin=("graph_app", model._meta.model_name or kind, row.pk),
            )
    return found


def _state(
    kind: str, key: str, *, sha_now: str, erased: bool, label: str, **rest: Any
) -> dict[str, Any]:
    """A source as it is now (the hash at delivery comes from the receipt)."""
    return {"kind": kind, "id": key, "sha_now": sha_now, "erased": erased, "label": label, **rest}


def delivery_view(record: InjectionRecord) -> Delivery:
    """The exact text delivered, the scores, and each source with "changed since" (its content
    hash now against the hash in the receipt) and "erased"."""
    items = list(record.items)
    now: dict[tuple[str, str], dict[str, Any]] = {
        **_session_states(items, record.project_id),
        **_graph_states(items),
    }
    sources = []
    for item in items:
        found = now.get((item["kind"], item["id"]))
        sha_now = found["sha_now"] if found else None
        sources.append(
            SourceState(
                **source_compared(item, sha_now, erased=bool(found and found["erased"])),
                exists=found is not None,
                label=found["label"] if found else f"{item['kind']} {item['id']} (no longer held)",
                admin=found.get("admin") if found else None,
                scores=found.get("scores", {}) if found else {},
            )
        )
    return Delivery(
        record=record,
        text=record.system_prompt,
        text_erased=ErasedText.objects.filter(sha256=record.prompt_sha256).exists(),
        signals=_signals(record),
        sources=sources,
    )


def _signals(record: InjectionRecord) -> dict[str, Any]:
    """What the record itself says about the decision: its score, threshold, decision and mode,
    and the request's own parameters."""
    signals: dict[str, Any] = {
        "trust_score": record.trust_score,
        "threshold": record.threshold,
        "meets_threshold": record.trust_score >= record.threshold,
        "decision": record.decision or "—",
        "mode": record.mode,
    }
    for key, value in sorted(record.request.items()):
        if isinstance(value, str | int | float | bool) or value is None:
            signals[f"request.{key}"] = value
    return signals
