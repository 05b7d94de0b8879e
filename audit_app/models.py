"""The injection log: one append-only, hash-chained record per context-injection decision.

Each record stores what was decided and the exact system prompt returned (with its SHA-256), and
links to the previous record: ``record_hash`` is the SHA-256 of the record's canonical JSON
(RFC 8785) including ``prev_hash``. Any edit or deletion breaks the chain from that record on.
``InjectionLogHead`` is the single row that appends lock, so concurrent writers on PostgreSQL
and SQLite get consecutive ``seq`` values and the right ``prev_hash``.
"""

from __future__ import annotations

from django.db import models

from memoryproject.models import Project
from memoryproject.timeutil import iso

GENESIS_HASH = "0" * 64


class InjectionRecord(models.Model):
    seq = models.PositiveBigIntegerField(unique=True)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="injections")
    source = models.CharField(max_length=16)  # plan | load
    channel = models.CharField(max_length=32)  # rest | mcp | benchmark | ...
    client = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16)
    decision = models.CharField(max_length=8)
    trust_score = models.FloatField()
    threshold = models.FloatField()
    mode = models.CharField(max_length=16)
    trace_ids = models.JSONField(default=list)
    system_prompt = models.TextField(blank=True)
    prompt_sha256 = models.CharField(max_length=64)
    generated_at = models.DateTimeField()
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    record_hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["-seq"]
        indexes = [models.Index(fields=["project", "created_at"], name="injection_project_recent")]

    def __str__(self) -> str:
        return f"injection #{self.seq} {self.status} ({self.project_id})"


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
        return f"contradiction audit of {self.project.slug} at {self.started_at:%Y-%m-%d %H:%M:%S}"


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
        return f"{self.rule} on {self.subject} ({self.state})"


class InjectionLogHead(models.Model):
    """The chain head: the last appended seq and hash (one row, pk=1)."""

    seq = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"head #{self.seq}"


def record_payload(record: InjectionRecord) -> dict[str, object]:
    """The hashed fields of a record (``audit_app.domain.chain.HASHED_FIELDS``), as the chain
    hashes them: the one canonical form the writer and the verifier share."""
    return {
        "seq": record.seq,
        "project_id": record.project_id,
        "source": record.source,
        "channel": record.channel,
        "client": record.client,
        "status": record.status,
        "decision": record.decision,
        "trust_score": record.trust_score,
        "threshold": record.threshold,
        "mode": record.mode,
        "trace_ids": list(record.trace_ids),
        "prompt_sha256": record.prompt_sha256,
        "generated_at": iso(record.generated_at),
        "created_at": iso(record.created_at),
        "prev_hash": record.prev_hash,
    }
