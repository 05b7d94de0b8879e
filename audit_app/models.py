"""The injection log: one append-only, hash-chained record per context delivery, and the
tables that keep it provable.

Each record (``InjectionRecord``) says who asked, what was asked (``request``), what was
delivered (``items``: each source's kind, id and content hash) and the SHA-256 of the exact
text; the text itself lives apart in ``DeliveredText`` (keyed by that SHA-256, stored once)
so that it can be erased (``ErasedText`` keeps the tombstone) without touching the chain.
``record_hash`` is the SHA-256 of the record's canonical JSON (``record_payload``, RFC 8785)
including ``prev_hash``, so any edit, deletion or insertion breaks the chain from there.
Erasure and purge events are records of the same chain (``source`` "erasure" or "purge").

``InjectionLogHead`` is the single row appends lock (so concurrent writers on PostgreSQL and
SQLite get consecutive seqs) and the anchor verification compares against: the last seq and
hash. ``AuditCheckpoint`` keeps the signed checkpoints (their file form goes elsewhere).

Append-only at every level. The ORM refuses ``save()`` of an existing row, ``delete()`` and
queryset ``update()``/``delete()`` on these tables; triggers (migration 0003) refuse UPDATE
and DELETE (and TRUNCATE on PostgreSQL) in the database. The head is the one row that changes:
it may only move forward, one record at a time, to a record that exists with that hash (the
trigger checks it), so it stays the lock appends take. Only ``audit_maintenance()`` opens the
gate, inside the current transaction: the retention purge and tests that tamper on purpose
use it. A later migration that rebuilds one of these tables on SQLite (most ALTERs do) drops
its triggers: it must install them again (``injection_log_verify`` warns when any is missing).

What this cannot stop: whoever can drop triggers can rewrite the tables, and INSERT stays open
(appending is the point). Edits, deletions and insertions are then caught by the chain; a
rewrite with every hash and the head recomputed only by a signed checkpoint kept elsewhere;
and a forged record appended at the tail with the head moved too looks like a real append
until something outside the database (a checkpoint, the caller's own answer) disagrees.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from audit_app.domain.chain import EMPTY_TEXT_SHA256
from audit_app.gate import audit_maintenance as audit_maintenance
from memoryproject.append_only import AppendOnlyModel
from memoryproject.domain.hash_chain import GENESIS_HASH as GENESIS_HASH
from memoryproject.models import Project
from memoryproject.timeutil import human_utc, iso

# --- the log ----------------------------------------------------------------------------------


#: How a record's ``source`` reads in titles.
SOURCE_TITLES = {
    "plan": "Plan",
    "load": "Session load",
    "compile": "Compiled memory",
    "prompt": "Prompt",
    "erasure": "Erasure event",
    "purge": "Purge event",
}


class InjectionRecord(AppendOnlyModel):
    seq = models.PositiveBigIntegerField(unique=True)
    format = models.PositiveSmallIntegerField(default=2)  # see audit_app.domain.chain
    # None only for log events (purge) that concern no project. Indexed by
    # injection_project_recent (project, created_at), which serves lookups by project too.
    project = models.ForeignKey(
        Project,
        on_delete=models.PROTECT,
        related_name="injections",
        null=True,
        blank=True,
        db_index=False,
    )
    source = models.CharField(
        max_length=16
    )  # plan | load | item (audit_app.quarantine) | compile | prompt | erasure | purge
    channel = models.CharField(max_length=32)  # rest | mcp | cli | benchmark | ...
    # The authenticated identity: "api_key:<prefix> (<label>)" or "local:<project>/<scope>".
    client = models.CharField(max_length=200, blank=True)
    # What the client called itself (MCP initialize clientInfo.name): self-reported, unverified.
    client_reported = models.CharField(
        max_length=200, blank=True, default="", verbose_name="client (self-reported)"
    )
    status = models.CharField(max_length=16)
    decision = models.CharField(max_length=8)
    trust_score = models.FloatField()
    threshold = models.FloatField()
    mode = models.CharField(max_length=16)
    trace_ids = models.JSONField(default=list)
    # What was asked (query, budget, as_of, ...); for an event, its details.
    request = models.JSONField(default=dict)
    # What was delivered: [{"kind", "id", "sha256"}] (content hash at delivery).
    items = models.JSONField(default=list)
    prompt_sha256 = models.CharField(max_length=64)
    generated_at = models.DateTimeField()
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    record_hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["-seq"]
        indexes = [
            models.Index(fields=["project", "created_at"], name="injection_project_recent"),
            models.Index(fields=["source", "seq"], name="injection_source_seq"),
            models.Index(fields=["prompt_sha256"], name="injection_prompt_sha256"),
        ]

    def __str__(self) -> str:
        # "Plan for project demo — injected, 2026-11-30 16:00:12 UTC"
        what = SOURCE_TITLES.get(self.source, self.source.capitalize() or "Record")
        where = f" for project {self.project.slug}" if self.project is not None else ""
        return f"{what}{where} — {self.status}, {human_utc(self.created_at)}"

    @property
    def system_prompt(self) -> str:
        """The exact text delivered, from the text store ("" when none, or erased)."""
        if "_system_prompt" not in self.__dict__:
            text = ""
            if self.prompt_sha256 and self.prompt_sha256 != EMPTY_TEXT_SHA256:
                stored = DeliveredText.objects.filter(sha256=self.prompt_sha256)
                text = stored.values_list("text", flat=True).first() or ""
            self.__dict__["_system_prompt"] = text
        return str(self.__dict__["_system_prompt"])


class InjectionLogHead(AppendOnlyModel):
    """The chain head: the last appended seq and hash (one row, pk=1). It only moves forward,
    one record at a time (the trigger checks the record exists with that hash)."""

    seq = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"Log head at seq {self.seq} ({self.last_hash[:12]}…)"

    def save(self, *args: Any, **kwargs: Any) -> None:
        stored = self.__dict__.get("_stored_seq")
        if self._state.adding or (stored is not None and self.seq == stored + 1):
            models.Model.save(self, *args, **kwargs)
        else:
            super().save(*args, **kwargs)  # refused unless the gate is open
        self.__dict__["_stored_seq"] = self.seq

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> InjectionLogHead:
        head = super().from_db(db, field_names, values)
        head.__dict__["_stored_seq"] = head.seq
        return head


class DeliveredText(AppendOnlyModel):
    """The exact texts delivered, once each, keyed by their SHA-256 (what records hash). A row
    leaves only by erasure, which first writes its tombstone (the trigger checks it), or by the
    retention purge."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    text = models.TextField()
    stored_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"Delivered text {self.sha256[:12]}… stored {human_utc(self.stored_at)}"


class ErasedText(AppendOnlyModel):
    """The tombstone of an erased text: which hash, when and why. Records that delivered it
    keep verifying (they hash only the SHA-256)."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    erased_at = models.DateTimeField()
    reason = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"Erased text {self.sha256[:12]}… at {human_utc(self.erased_at)}"


class AuditCheckpoint(AppendOnlyModel):
    """A signed checkpoint: the log's head (seq and hash) and each project's graph chain head
    at ``created_at``; ``body`` is what ``mac`` (HMAC-SHA256, key from the environment)
    signs. Verification holds the chain to the latest one."""

    created_at = models.DateTimeField()
    log_seq = models.PositiveBigIntegerField()
    log_head = models.CharField(max_length=64)
    body = models.JSONField()
    mac = models.CharField(max_length=64)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"Checkpoint at seq {self.log_seq}, {human_utc(self.created_at)}"


class AuditMaintenanceGrant(AppendOnlyModel):
    """A maintenance opening of the append-only tables, as the witness signed it (``witness_n``
    is its entry there, ``body`` what was signed). On PostgreSQL the triggers let UPDATE,
    DELETE and TRUNCATE through only in the transaction that inserted a grant (``txid``); on
    SQLite only a connection of this service whose thread holds the gate (a function the
    service registers on its connections; raw SQL elsewhere finds no such function). A grant
    row the witness does not hold is reported by every verifier."""

    created_at = models.DateTimeField()
    purpose = models.CharField(max_length=64)
    txid = models.BigIntegerField(null=True, blank=True)
    witness_n = models.PositiveBigIntegerField()
    body = models.JSONField()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"Maintenance grant #{self.pk} ({self.purpose}), {human_utc(self.created_at)}"


class AuditRun(models.Model):
    """One run of the contradiction auditor over a project's facts held at ``as_of``."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="audit_runs")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    as_of = models.DateTimeField()
    facts_checked = models.PositiveIntegerField()
    findings = models.PositiveIntegerField(help_text="Findings reported (open) by this run")
    auto_resolved = models.PositiveIntegerField(default=0)
    channel = models.CharField(max_length=32)
    client = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"Contradiction audit of {self.project.slug}, {human_utc(self.started_at)}"


class FindingState(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


class ContradictionFinding(models.Model):
    """A contradiction the auditor found, kept until a person (or auto-resolve) settles it.

    ``fingerprint`` covers the rule and the content hashes of the facts: the same conflict
    found again updates ``last_seen_run``; a dismissed one is not reported again until one of
    its facts changes (and so its fingerprint)."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="findings")
    first_run = models.ForeignKey(AuditRun, on_delete=models.PROTECT, related_name="+")
    last_seen_run = models.ForeignKey(AuditRun, on_delete=models.PROTECT, related_name="+")
    fingerprint = models.CharField(max_length=64)
    rule = models.CharField(max_length=16)
    subject = models.CharField(max_length=128)
    fact_ids = models.JSONField()
    evidence = models.TextField()
    suggestion = models.TextField()
    keep_fact = models.CharField(max_length=40, blank=True)
    state = models.CharField(max_length=12, choices=FindingState.choices, default="open")
    settled_by = models.CharField(max_length=200, blank=True)
    reason = models.TextField(blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "fingerprint"], name="finding_unique_per_project"
            ),
        ]
        indexes = [models.Index(fields=["project", "state"], name="finding_project_state")]

    def __str__(self) -> str:
        return f"{self.rule.capitalize()} contradiction on {self.subject} — {self.state}"


class ReviewState(models.TextChoices):
    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
    DELIVERED = "delivered"
    VOID = "void"


class Review(models.Model):
    """A flagged context waiting for a person's decision, and what became of it.

    Written when a plan in mode auto is flagged (``flagged_injection_id`` is its receipt) or a
    load refuses the latest summary on trust (a refused load delivers nothing, so it writes no
    receipt). It keeps what the reviewer judges: the reason, score, signals and the exact text
    that would be delivered, and the sources with their content hashes. Approved, it is
    delivered once, on the project's next call of the same kind (``delivered_injection_id``);
    rejected, never. It is voided when its sources change before delivery. The decision itself
    is an event of the injection log (``decision_seq``). Injection ids, not foreign keys: the
    retention purge removes old receipts and must not take the queue with them.
    """

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="reviews")
    source = models.CharField(max_length=16)  # plan | load | item (audit_app.quarantine)
    created_at = models.DateTimeField()
    flagged_injection_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The receipt of the flagged plan (loads write none)."
    )
    reason = models.TextField()
    trust_score = models.FloatField()
    risk = models.FloatField()
    threshold = models.FloatField()
    decision = models.CharField(max_length=8)
    signals = models.JSONField(default=dict)
    context = models.JSONField(default=dict)
    trace_ids = models.JSONField(default=list)
    # The reviewed sources: [{"kind", "id", "sha256"}], checked again before delivery.
    items = models.JSONField(default=list)
    text = models.TextField(help_text="The exact text that is delivered once approved.")
    text_sha256 = models.CharField(max_length=64)
    state = models.CharField(max_length=12, choices=ReviewState.choices, default="open")
    decided_by = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    decision_seq = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The injection log event that records the decision."
    )
    delivered_injection_id = models.PositiveBigIntegerField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True, help_text="Why an approved context was not delivered.")

    class Meta:
        ordering = ["-id"]
        verbose_name = "flagged context to review"
        verbose_name_plural = "flagged contexts to review"
        permissions = [
            ("decide_review", "Can approve or reject flagged contexts and contradiction findings")
        ]
        constraints = [
            # A context already waiting (or approved) is not queued again.
            models.UniqueConstraint(
                fields=["project", "source", "text_sha256"],
                condition=models.Q(state__in=["open", "approved"]),
                name="review_pending_once",
            ),
        ]
        indexes = [models.Index(fields=["project", "state"], name="review_project_state")]

    def __str__(self) -> str:
        what = {"plan": "plan", "load": "session load", "item": "quarantined item"}
        return (
            f"Review #{self.pk} of a flagged {what.get(self.source, self.source)} for "
            f"{self.project} ({self.state})"
        )


class FindingReview(ContradictionFinding):
    """Contradiction findings as the review queue shows them (same rows, decided with the
    review permission)."""

    class Meta:
        proxy = True
        verbose_name = "contradiction finding to review"
        verbose_name_plural = "contradiction findings to review"


def record_payload(record: InjectionRecord) -> dict[str, object]:
    """The record's canonical form, as the chain hashes it (``audit_app.domain.chain`` picks
    the fields of its format): the one definition the writer, the verifier and the tests
    share."""
    return {
        "seq": record.seq,
        "format": record.format,
        "project_id": record.project_id,
        "source": record.source,
        "channel": record.channel,
        "client": record.client,
        "client_reported": record.client_reported,
        "status": record.status,
        "decision": record.decision,
        "trust_score": record.trust_score,
        "threshold": record.threshold,
        "mode": record.mode,
        "trace_ids": record.trace_ids,
        "request": record.request,
        "items": record.items,
        "prompt_sha256": record.prompt_sha256,
        "generated_at": iso(record.generated_at),
        "created_at": iso(record.created_at),
        "prev_hash": record.prev_hash,
    }


# Declared in its own module (what receipts delivered, and the protection of that evidence).
from audit_app.receipt_sources import ReceiptSource  # noqa: E402, F401
