"""Admin for the knowledge graph: entities are editable (kind, name, aliases) through the
same service as the API, so each edit is validated alike and sealed in the change log; facts,
episodes and the change log are browsable but read-only, because their hashes seal them and
history is never rewritten by hand (facts change only through the services: supersession,
retraction)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from graph_app.contracts.graph import EntityUpsertInput
from graph_app.models import Entity, Episode, GraphChange, TemporalFact
from graph_app.services import entity_upsert
from memoryproject.admin import ServiceRowsAdmin
from memoryproject.errors import ApplicationError


class EntityForm(forms.ModelForm):
    """Checks an edit with the service's own input model."""

    class Meta:
        model = Entity
        fields = ["kind", "name", "aliases"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            self.upsert = EntityUpsertInput.parse(
                {
                    "entity_id": self.instance.slug,
                    "kind": data.get("kind"),
                    "name": data.get("name"),
                    "aliases": data.get("aliases") or [],
                }
            )
        except ApplicationError as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, exc.message)
        return data


@admin.register(Entity)
class EntityAdmin(ServiceRowsAdmin):
    """Entities are created on first mention by facts and episodes; kind, name and aliases
    are edited through ``entity_upsert``."""

    allow_change = True
    form = EntityForm
    list_display = ["slug", "kind", "name", "project", "created_at"]
    list_filter = ["project", "kind"]
    search_fields = ["slug", "name"]
    readonly_fields = ["project", "slug", "created_at"]

    def save_model(self, request: HttpRequest, obj: Entity, form: Any, change: bool) -> None:
        entity_upsert(project=obj.project, params=form.upsert)
        obj.refresh_from_db()


@admin.register(GraphChange)
class GraphChangeAdmin(ServiceRowsAdmin):
    """The graph change log, read-only: entries are only ever appended by the services."""

    list_display = ["seq", "project_id", "action", "record_type", "record_id", "recorded_at"]
    list_filter = ["project", "action", "record_type"]
    search_fields = ["record_id", "record_sha256", "hash"]


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
