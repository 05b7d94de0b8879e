"""Roles people hold in the console, as Django groups.

"Compliance officer": reads the audit trail, the sessions and the graph (view on every model
of those apps), exports the injection log, and decides reviews (approve or reject flagged
contexts and contradiction findings). Nothing else: no add, change or delete anywhere.

The group is made by a data migration (``memoryproject 0003``) and made again, when missing,
after every ``migrate`` (a flush, as test runs do, empties the auth tables): an administrator's
later change to an existing group is left as it is."""

from __future__ import annotations

from typing import Any

from django.apps.registry import Apps

COMPLIANCE_OFFICER = "Compliance officer"
#: Every model of these apps can be viewed by the group.
VIEW_APPS = ("audit_app", "sessions_app", "graph_app")
#: (app_label, model_name, codename, name): the rest of the group's permissions.
EXTRA_PERMISSIONS = (
    ("audit_app", "injectionrecord", "export_injectionrecord", "Can export injection record"),
    (
        "audit_app",
        "review",
        "decide_review",
        "Can approve or reject flagged contexts and contradiction findings",
    ),
)


def _permission(apps: Apps, app_label: str, model: str, codename: str, name: str) -> Any:
    content_type_model = apps.get_model("contenttypes", "ContentType")
    permission_model = apps.get_model("auth", "Permission")
    content_type, _ = content_type_model.objects.get_or_create(app_label=app_label, model=model)
    permission, _ = permission_model.objects.get_or_create(
        content_type=content_type, codename=codename, defaults={"name": name[:255]}
    )
    return permission


def compliance_officer_permissions(apps: Apps) -> list[Any]:
    """The group's permissions, created when missing (a data migration runs before Django
    creates the default permissions of a fresh database)."""
    wanted = []
    for label in VIEW_APPS:
        for model in apps.get_app_config(label).get_models():
            opts = model._meta
            wanted.append(
                _permission(
                    apps,
                    label,
                    str(opts.model_name),
                    f"view_{opts.model_name}",
                    f"Can view {opts.verbose_name}",
                )
            )
    for app_label, model_name, codename, name in EXTRA_PERMISSIONS:
        wanted.append(_permission(apps, app_label, model_name, codename, name))
    return wanted


def compliance_officer_group_ensure(apps: Apps, *, replace: bool) -> Any:
    """The group with exactly its permissions (``replace``), or made only when missing."""
    group_model = apps.get_model("auth", "Group")
    group, created = group_model.objects.get_or_create(name=COMPLIANCE_OFFICER)
    if created or replace:
        group.permissions.set(compliance_officer_permissions(apps))
    return group


def ensure_roles_after_migrate(sender: Any, **kwargs: Any) -> None:
    """post_migrate receiver: brings the group back when a flush removed it."""
    from django.apps import apps as global_apps

    compliance_officer_group_ensure(global_apps, replace=False)
