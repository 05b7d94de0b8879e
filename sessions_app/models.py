"""Traces of agent work and the session summaries saved between sessions.

A trace is one recorded step (a model call, a tool run, a saved summary) with the structured
context fields in ``metadata``. ``policy`` says what produced it (free text from the client,
``session_save`` for summaries saved through this service). Traces are read newest first per
project, so the (project, created_at, id) index serves /v1/plan and the list endpoint.
"""

from __future__ import annotations

import uuid

from django.db import models

from memoryproject.models import Project
from memoryproject.timeutil import human_utc, utcnow

DECISION_CHOICES = [("PASS", "PASS"), ("REFINE", "REFINE"), ("ESCALATE", "ESCALATE")]
SESSION_SAVE_POLICY = "session_save"


class Trace(models.Model):
    # Unique within its project (see the constraint): a client may choose the id, and whether
    # another project holds the same id must never show.
    trace_id = models.UUIDField(default=uuid.uuid4, editable=False, db_index=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="traces")
    created_at = models.DateTimeField(default=utcnow)
    model = models.CharField(max_length=200, blank=True)
    policy = models.CharField(max_length=64, blank=True)
    decision = models.CharField(max_length=8, choices=DECISION_CHOICES)
    trust_score = models.FloatField()
    risk = models.FloatField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "created_at", "id"], name="trace_project_recent"),
            models.Index(
                fields=["project", "decision", "created_at"], name="trace_project_decision"
            ),
            models.Index(fields=["project", "model", "created_at"], name="trace_project_model"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "trace_id"], name="trace_unique_per_project"
            ),
            models.CheckConstraint(
                condition=models.Q(trust_score__gte=0, trust_score__lte=1),
                name="trace_trust_score_0_1",
            ),
            models.CheckConstraint(
                condition=models.Q(risk__gte=0, risk__lte=1), name="trace_risk_0_1"
            ),
            models.CheckConstraint(
                condition=models.Q(decision__in=["PASS", "REFINE", "ESCALATE"]),
                name="trace_decision_valid",
            ),
        ]

    def __str__(self) -> str:
        # "Trace of claude-sonnet in demo — PASS, 2026-11-30 16:00:12 UTC (1c9e…)"
        model = f" of {self.model}" if self.model else ""
        return (
            f"Trace{model} in {self.project.slug} — {self.decision}, "
            f"{human_utc(self.created_at)} ({self.trace_id})"
        )


class SessionSummary(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="session_summaries")
    trace = models.OneToOneField(Trace, on_delete=models.CASCADE, related_name="session_summary")
    summary = models.TextField()
    tokens = models.PositiveIntegerField()
    signals = models.JSONField(default=dict)
    trust_score = models.FloatField()
    risk = models.FloatField()
    decision = models.CharField(max_length=8, choices=DECISION_CHOICES)
    created_at = models.DateTimeField(default=utcnow)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "session summaries"
        indexes = [
            models.Index(fields=["project", "created_at", "id"], name="summary_project_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(trust_score__gte=0, trust_score__lte=1),
                name="summary_trust_score_0_1",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"Session summary for {self.project.slug} — {self.decision}, "
            f"{human_utc(self.created_at)}"
        )
