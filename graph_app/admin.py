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
from django.urls import reverse
from django.utils.safestring import SafeString

from graph_app.contracts.entities import EntityUpsertInput
from graph_app.entity_writes import entity_upsert
from graph_app.models import Entity, Episode, GraphChange, TemporalFact
from graph_app.write_screening import entity_screen
from memoryproject.admin import ServiceRowsAdmin, utc_time_cell
from memoryproject.errors import ApplicationError


class EntityForm(forms.ModelForm):
    """Checks an edit with the service's own input model and screening."""

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
            entity_screen(self.upsert)  # a secret in the entity's id refuses the edit here
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
    list_display = ["slug", "kind", "name", "project", "created"]
    list_filter = ["project", "kind"]
    search_fields = ["slug", "name"]
    list_select_related = ["project"]
    readonly_fields = ["project", "slug", "created_at"]

    def view_on_site(self, obj: Entity) -> str:  # "View on site": the memory browser's page
        return reverse("memory_browser:entity", args=[obj.project.slug, obj.slug])

    @admin.display(description="created (UTC · local)", ordering="created_at")
    def created(self, obj: Entity) -> SafeString:
        return utc_time_cell(obj.created_at)

    def save_model(self, request: HttpRequest, obj: Entity, form: Any, change: bool) -> None:
        entity_upsert(project=obj.project, params=form.upsert)
        obj.refresh_from_db()


@admin.register(GraphChange)
class GraphChangeAdmin(ServiceRowsAdmin):
    """The graph change log, read-only: entries are only ever appended by the services."""

    list_display = ["__str__", "seq", "project", "action", "record_type", "record_id", "recorded"]
    list_filter = ["project", "action", "record_type"]
    search_fields = ["record_id", "record_sha256", "hash"]
    list_select_related = ["project"]

    @admin.display(description="recorded (UTC · local)", ordering="recorded_at")
    def recorded(self, change: GraphChange) -> SafeString:
        return utc_time_cell(change.recorded_at)


@admin.register(TemporalFact)
class TemporalFactAdmin(ServiceRowsAdmin):
    list_display = [
        "__str__",
        "id",
        "subject",
        "predicate",
        "object_value",
        "status_label",
        "valid_from_cell",
        "valid_until_cell",
        "recorded_cell",
        "project",
    ]
    list_filter = ["project", "singular", ("valid_until", admin.EmptyFieldListFilter)]
    search_fields = ["id", "subject__slug", "predicate", "object_value"]
    list_select_related = ["project", "subject"]
    date_hierarchy = "recorded_at"

    @admin.display(description="status")
    def status_label(self, obj: TemporalFact) -> str:
        return obj.status

    @admin.display(description="valid from (UTC)", ordering="valid_from")
    def valid_from_cell(self, obj: TemporalFact) -> SafeString:
        return utc_time_cell(obj.valid_from)

    @admin.display(description="valid until (UTC)", ordering="valid_until")
    def valid_until_cell(self, obj: TemporalFact) -> SafeString:
        return utc_time_cell(obj.valid_until)

    @admin.display(description="recorded (UTC)", ordering="recorded_at")
    def recorded_cell(self, obj: TemporalFact) -> SafeString:
        return utc_time_cell(obj.recorded_at)


@admin.register(Episode)
class EpisodeAdmin(ServiceRowsAdmin):
    list_display = ["title", "id", "category", "occurred", "external_id", "project"]
    list_filter = ["project", "category"]
    search_fields = ["id", "title", "content", "external_id"]
    list_select_related = ["project"]
    date_hierarchy = "occurred_at"
    exclude = ["entities"]

    @admin.display(description="occurred (UTC · local)", ordering="occurred_at")
    def occurred(self, obj: Episode) -> SafeString:
        return utc_time_cell(obj.occurred_at)
