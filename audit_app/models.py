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


class InjectionLogHead(models.Model):
    """The chain head: the last appended seq and hash (one row, pk=1)."""

    seq = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"head #{self.seq}"
