"""Admin for projects and API keys (keys are listed and revoked here; created by command)."""

from datetime import datetime

from django.contrib import admin, messages
from django.contrib.admin.exceptions import NotRegistered
from django.http import HttpRequest, HttpResponseRedirect
from django.utils.html import format_html
from django.utils.safestring import SafeString
from rest_framework_api_key.admin import APIKeyModelAdmin

from memoryproject.models import Project, ProjectAPIKey
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

    @admin.action(description="Revoke the selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset):  # type: ignore[no-untyped-def]
        count = 0
        for key in queryset.filter(revoked=False):
            key.revoked = True
            key.save(update_fields=["revoked"])
            count += 1
        self.message_user(request, f"Revoked {count} API key(s).", messages.SUCCESS)
        return HttpResponseRedirect(request.get_full_path())


# The library's own key model is unused: keys are project-bound ProjectAPIKey rows.
try:
    from rest_framework_api_key.models import APIKey

    admin.site.unregister(APIKey)
except NotRegistered:  # pragma: no cover
    pass
