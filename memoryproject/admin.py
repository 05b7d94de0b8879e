"""Admin for projects and API keys (keys are listed and revoked here; created by command), and
the bases the apps' admins share.

Every admin action names the permission it needs (``@admin.action(permissions=...)``): the
admin offers it, and runs it, only for people who hold that permission on the model, and the
action writes the admin's history (``LogEntry``) of what it changed."""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin.exceptions import NotRegistered
from django.db.models import QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.html import format_html
from django.utils.safestring import SafeString
from rest_framework_api_key.admin import APIKeyModelAdmin

from memoryproject.entitlements import key_prefixes_hidden, may_see_key_prefixes
from memoryproject.models import Project, ProjectAPIKey
from memoryproject.services import api_keys_revoke
from memoryproject.timeutil import iso

admin.site.site_header = "memoryproject console"
admin.site.site_title = "memoryproject"


def utc_time_cell(value: datetime | None) -> SafeString:
    """A time as the console shows it: ISO-8601 in UTC to the second, with the reader's local
    time beside it (filled in by the console script from the same instant; the UTC text
    stands alone without it)."""
    if value is None:
        return format_html("{}", "—")
    stamp = iso(value.replace(microsecond=0)) or ""
    return format_html(
        '<time datetime="{}" class="utc-time">{}</time>'
        '<span class="local-time" data-utc="{}"></span>',
        stamp,
        stamp,
        stamp,
    )


def time_column(
    field: str, label: str, *, sortable: bool = True
) -> Callable[[Any, Any], SafeString]:
    """A list column (assigned in a ModelAdmin's body) showing the time ``field`` as
    ``utc_time_cell`` does, headed ``<label> (UTC · local)``, sorted by ``field`` if
    ``sortable``."""

    @admin.display(description=f"{label} (UTC · local)", ordering=field if sortable else None)
    def cell(model_admin: Any, obj: Any) -> SafeString:
        return utc_time_cell(getattr(obj, field))

    return cell


class ServiceRowsAdmin(admin.ModelAdmin):
    """Rows that only the services create (so hashes, history and receipts stay true): never
    added here; changed or deleted only where a subclass allows it."""

    allow_change = False
    allow_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return self.allow_change and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return self.allow_delete and super().has_delete_permission(request, obj)

    def change_form_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        """What the detail page of ``obj`` (None on an add form) shows beyond its fields."""
        return {}

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        context.update(self.change_form_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)


CLIENT = "client"
CLIENT_MASKED = "client_masked"


def client_names(request: HttpRequest, names: Sequence[Any]) -> list[Any]:
    """Field or column names as ``request``'s user may see them: ``client`` stands as is for
    people who may view API keys, and as its masked column for everyone else."""
    if may_see_key_prefixes(request.user):
        return list(names)
    shown: list[Any] = []
    for name in names:
        name = CLIENT_MASKED if name == CLIENT else name
        if name not in shown:
            shown.append(name)
    return shown


class ClientColumnAdmin(admin.ModelAdmin):
    """Rows with a ``client`` (who asked: ``api_key:<prefix> (<name>)`` for an API key). The
    key's prefix shows only to people who may view API keys (memoryproject.entitlements); for
    everyone else the column and the detail mask it, the list has no client filter, and no
    lookup on ``client`` is accepted (``?client__startswith=`` would spell a prefix out)."""

    def get_list_display(self, request: HttpRequest) -> Any:
        return client_names(request, super().get_list_display(request))

    def get_list_filter(self, request: HttpRequest) -> Any:
        filters = super().get_list_filter(request)
        if may_see_key_prefixes(request.user):
            return filters
        return [item for item in filters if item != CLIENT]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return client_names(request, super().get_fields(request, obj))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_with_client(request, super().get_readonly_fields(request, obj))

    def readonly_with_client(self, request: HttpRequest, names: Sequence[Any]) -> list[Any]:
        # The masked column is never a form field: it must be read-only wherever it shows.
        shown = client_names(request, names)
        if not may_see_key_prefixes(request.user) and CLIENT_MASKED not in shown:
            shown.append(CLIENT_MASKED)
        return shown

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        if lookup.split(LOOKUP_SEP)[0] == CLIENT and (
            request is None or not may_see_key_prefixes(request.user)
        ):
            return False
        return super().lookup_allowed(lookup, value, request)

    @admin.display(description="client")
    def client_masked(self, obj: Any) -> str:
        return key_prefixes_hidden(obj.client) or "—"


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(ProjectAPIKey)
class ProjectAPIKeyAdmin(APIKeyModelAdmin):
    list_display = (*APIKeyModelAdmin.list_display, "scope", "project_list")  # type: ignore[assignment]
    list_filter = (*APIKeyModelAdmin.list_filter, "scope", "projects")  # type: ignore[assignment]
    filter_horizontal = ["projects"]
    actions = ["revoke_keys"]

    @admin.display(description="projects")
    def project_list(self, obj: ProjectAPIKey) -> str:
        return ", ".join(p.slug for p in obj.projects.all())

    @admin.action(description="Revoke the selected API keys", permissions=["change"])
    def revoke_keys(
        self, request: HttpRequest, queryset: QuerySet[ProjectAPIKey]
    ) -> HttpResponseRedirect:
        revoked = api_keys_revoke(
            key_ids=list(queryset.values_list("pk", flat=True)),
            by_user_id=cast(int, request.user.pk),  # the admin runs actions for staff only
        )
        self.message_user(request, f"Revoked {len(revoked)} API key(s).", messages.SUCCESS)
        return HttpResponseRedirect(request.get_full_path())


# The library's own key model is unused: keys are project-bound ProjectAPIKey rows.
try:
    from rest_framework_api_key.models import APIKey

    admin.site.unregister(APIKey)
except NotRegistered:  # pragma: no cover
    pass
