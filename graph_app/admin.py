"""Admin for the knowledge graph: entities are editable (kind, name, aliases); facts and
episodes are browsable but read-only, because their hashes seal them and history is never
rewritten by hand (facts change only through the services: supersession, retraction)."""

from __future__ import annotations

from django.contrib import admin

from graph_app.models import Entity, Episode, TemporalFact
from memoryproject.admin import ServiceRowsAdmin


@admin.register(Entity)
class EntityAdmin(ServiceRowsAdmin):
    """Entities are created on first mention by facts and episodes; kind and name are edited."""

    allow_change = True
    list_display = ["slug", "kind", "name", "project", "created_at"]
    list_filter = ["project", "kind"]
    search_fields = ["slug", "name"]
    readonly_fields = ["project", "slug", "created_at"]


@admin.register(TemporalFact)
class TemporalFactAdmin(ServiceRowsAdmin):
    list_display = [
        "id",
        "subject",
        "predicate",
        "object_value",
        "status_label",
        "valid_from",
        "valid_until",
        "recorded_at",
        "project",
    ]
    list_filter = ["project", "singular", ("valid_until", admin.EmptyFieldListFilter)]
    search_fields = ["id", "subject__slug", "predicate", "object_value"]
    list_select_related = ["project", "subject"]
    date_hierarchy = "recorded_at"

    @admin.display(description="status")
    def status_label(self, obj: TemporalFact) -> str:
        return obj.status


@admin.register(Episode)
class EpisodeAdmin(ServiceRowsAdmin):
    list_display = ["id", "category", "title", "occurred_at", "external_id", "project"]
    list_filter = ["project", "category"]
    search_fields = ["id", "title", "content", "external_id"]
    list_select_related = ["project"]
    date_hierarchy = "occurred_at"
    exclude = ["entities"]
