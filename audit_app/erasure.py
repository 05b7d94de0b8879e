"""Erasure without losing proof: remove a piece of content everywhere it lives, keep its hashes.

A trace, a saved summary, a fact, an episode, an entity or one delivered text (by its SHA-256)
is erased from its source row, from the stored texts of every receipt that delivered it and
from the compiler's cached index. What stays are hashes: the injection log never chained the
texts themselves (only their SHA-256), graph records leave a tombstone in the graph's change
log, and an ``erasure`` event appended to the log records what went, its hashes, when and why.
So every chain and integrity check still verifies, and the certificate says exactly what was
removed.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from audit_app.contracts import ErasedItem, ErasureCertificate
from audit_app.injection_log import audit_event_append, delivered_text_erase
from audit_app.models import InjectionRecord
from audit_app.receipt_sources import receipts_delivering
from audit_app.reviews import reviews_forget
from graph_app.index_cache import compiler_cache_forget
from graph_app.record_erasure import graph_record_erase
from memoryproject.errors import NotFoundError, validation_error
from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from memoryproject.writes import write_transaction
from sessions_app.models import SessionSummary, Trace
from sessions_app.selectors import summary_sha256, trace_sha256

Target = Literal["trace", "summary", "fact", "episode", "entity", "text"]
ERASED = "[erased]"


def _trace(trace_id: str, project: Project | None) -> Trace:
    try:
        key = uuid.UUID(trace_id)
    except ValueError:
        raise validation_error("trace", f"'{trace_id}' is not a trace id (a UUID)") from None
    found = Trace.objects.select_related("project").filter(trace_id=key)
    if project is not None:
        found = found.filter(project=project)
    traces = list(found[:2])
    if not traces:
        raise NotFoundError(f"trace: no trace '{trace_id}'", field="trace")
    if len(traces) > 1:
        # A trace id is unique only within its project.
        raise validation_error("project", f"is required: trace '{trace_id}' is in several projects")
    return traces[0]


def _erase_trace(trace: Trace) -> list[dict[str, str]]:
    """Blanks a trace's content (and its saved summary's, when it is one); answers the hashes
    of what was erased."""
    erased = [{"kind": "trace", "id": str(trace.trace_id), "sha256": trace_sha256(trace)}]
    summary = SessionSummary.objects.select_related("trace", "project").filter(trace=trace).first()
    if summary is not None:
        erased.append(
            {"kind": "summary", "id": str(trace.trace_id), "sha256": summary_sha256(summary)}
        )
        SessionSummary.objects.filter(pk=summary.pk).update(summary=ERASED, signals={})
    Trace.objects.filter(pk=trace.pk).update(model="", metadata={"erased": True})
    return erased


def _receipt_texts(
    items: list[dict[str, str]], project: Project | None
) -> tuple[list[int], list[str]]:
    """The receipts of ``project`` that delivered any of ``items``, and the SHA-256 of their
    stored texts."""
    seqs: set[int] = set()
    texts: set[str] = set()
    for item in items:
        rows = InjectionRecord.objects.filter(
            receipts_delivering(item["id"], kinds=(item["kind"],)), project=project
        )
        for seq, sha in rows.values_list("seq", "prompt_sha256"):
            seqs.add(seq)
            texts.add(sha)
    return sorted(seqs), sorted(texts)


def _erase_source(
    target: Target, ref: str, project: Project | None, reason: str
) -> tuple[Project | None, list[dict[str, str]]]:
    if target in ("trace", "summary"):
        trace = _trace(ref, project)
        if target == "summary" and not SessionSummary.objects.filter(trace=trace).exists():
            raise NotFoundError(f"summary: no saved summary '{ref}'", field="summary")
        return trace.project, _erase_trace(trace)
    if target in ("fact", "episode", "entity"):
        if project is None:
            raise validation_error("project", f"is required to erase a graph {target}")
        erased = graph_record_erase(
            project=project, record_type=target, record_id=ref, reason=reason
        )
        compiler_cache_forget(project.pk)
        return project, list(erased)
    return project, []


def erase(
    *, target: Target, ref: str, reason: str, by: str, project: Project | None = None
) -> ErasureCertificate:
    """Erases ``target`` ``ref`` (a trace id, a summary's trace id, a fact, episode or entity
    id with its ``project``, or a delivered text's SHA-256) and answers the certificate."""
    if not reason.strip():
        raise validation_error("reason", "must not be empty: say why the content is erased")
    with write_transaction():
        owner, erased = _erase_source(target, ref, project, reason)
        reviews_forget(project=owner, items=erased)
        receipts, texts = _receipt_texts(erased, owner)
        if target == "text":
            texts = [ref]
        gone = [sha for sha in texts if delivered_text_erase(sha256=sha, reason=reason.strip())]
        if target == "text" and not gone:
            raise NotFoundError(f"text: no stored text '{ref}'", field="text")
        details: dict[str, Any] = {
            "target": target,
            "ref": ref,
            "erased": erased,
            "receipts": receipts,
            "texts": gone,
            "reason": reason.strip(),
            "by": by,
        }
        event = audit_event_append(kind="erasure", project=owner, details=details)
    return ErasureCertificate(
        target=target,
        ref=ref,
        project=owner.slug if owner else None,
        erased=[ErasedItem(**item) for item in erased],
        receipts=receipts,
        texts_erased=gone,
        reason=reason.strip(),
        by=by,
        erased_at=utcnow(),
        event_seq=event.seq,
    )
