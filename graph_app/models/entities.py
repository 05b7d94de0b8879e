"""Entities: the nodes of the graph, named by a slug unique within their project."""

from __future__ import annotations

from django.db import models


class Entity(models.Model):
    project = models.ForeignKey(
        "memoryproject.Project", on_delete=models.CASCADE, related_name="entities"
    )
    slug = models.CharField(max_length=128)
    kind = models.CharField(max_length=32, default="concept")
    name = models.CharField(max_length=200, blank=True)
    aliases = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["slug"]
        verbose_name_plural = "entities"
        constraints = [
            models.UniqueConstraint(fields=["project", "slug"], name="graph_entity_unique_slug")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})" if self.name and self.name != self.slug else self.slug
