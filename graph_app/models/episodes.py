"""Episodes: immutable records of what happened (decisions, root causes, notes, turns).

``files_touched`` and ``entities_mentioned`` are kept as written (they are part of the hash);
EpisodeFile and the ``entities`` relation index them for filtering.
"""

from __future__ import annotations

from django.db import models


class EpisodeCategory(models.TextChoices):
    ADR = "adr", "architecture decision"
    BUG_ROOT_CAUSE = "bug_root_cause", "bug root cause"
    INVARIANT = "invariant", "invariant"
    SESSION_NOTE = "session_note", "session note"
    MIGRATION = "migration", "migration"
    INCIDENT = "incident", "incident"


class Episode(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    project = models.ForeignKey(
        "memoryproject.Project", on_delete=models.CASCADE, related_name="episodes"
    )
    category = models.CharField(max_length=32, choices=EpisodeCategory.choices)
    title = models.CharField(max_length=300)
    content = models.TextField()
    files_touched = models.JSONField(default=list, blank=True)
    entities_mentioned = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    entities = models.ManyToManyField("graph_app.Entity", related_name="episodes", blank=True)
    occurred_at = models.DateTimeField(db_index=True)
    recorded_at = models.DateTimeField()
    # NULL (not "") when absent, so the per-project uniqueness only binds episodes that have one.
    external_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    sha256 = models.CharField(max_length=64)
    revision = models.BigIntegerField(db_index=True)

    class Meta:
        ordering = ["-occurred_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"],
                condition=models.Q(external_id__isnull=False),
                name="graph_episode_unique_external_id",
            )
        ]
        indexes = [models.Index(fields=["project", "revision"], name="graph_ep_proj_rev")]

    def __str__(self) -> str:
        return f"{self.title} ({self.category}, {self.occurred_at:%Y-%m-%d})"


class EpisodeFile(models.Model):
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=500, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["episode", "path"], name="graph_episode_file_unique")
        ]

    def __str__(self) -> str:
        return self.path
