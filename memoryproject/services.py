"""Writes on projects and API keys."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model

from memoryproject.errors import ApplicationError
from memoryproject.models import Project, ProjectAPIKey, Scope
from memoryproject.projects import validate_project_slug
from memoryproject.writes import write_transaction


def project_create(*, slug: str, name: str = "") -> tuple[Project, bool]:
    """Creates a project (the only way one comes into being besides ``create_api_key
    --create-projects`` and the first run); answers it and whether it was created."""
    slug = validate_project_slug(slug)
    project, created = Project.objects.get_or_create(
        slug=slug, defaults={"name": (name or "").strip()[:200] or slug}
    )
    return project, created


def api_key_create(
    *, name: str, project_slugs: Sequence[str], scope: str, create_projects: bool = False
) -> tuple[ProjectAPIKey, str]:
    """Creates a key bound to the projects; answers the row and the key (shown once)."""
    if not name.strip():
        raise ApplicationError("name: must not be empty", field="name")
    if scope not in Scope.values:
        raise ApplicationError(
            f"scope: must be one of {', '.join(Scope.values)}, got '{scope}'", field="scope"
        )
    if not project_slugs:
        raise ApplicationError("project: at least one project is required", field="project")
    with write_transaction():
        projects = []
        for slug in project_slugs:
            slug = validate_project_slug(slug)
            if create_projects:
                project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
            else:
                try:
                    project = Project.objects.get(slug=slug)
                except Project.DoesNotExist as exc:
                    raise ApplicationError(
                        f"project: no project '{slug}' (pass --create-projects to create it)",
                        field="project",
                    ) from exc
            projects.append(project)
        created, key = ProjectAPIKey.objects.create_key(name=name.strip(), scope=scope)
        api_key = cast(ProjectAPIKey, created)
        api_key.projects.set(projects)
    return api_key, key


def api_keys_revoke(*, key_ids: Sequence[str], by_user_id: int) -> list[ProjectAPIKey]:
    """Revokes the keys of ``key_ids`` that are not revoked yet, for good (a revoked key is
    refused from its next request on, and nothing turns it back on); answers those it revoked.

    Each revocation is written to the admin's history (``LogEntry``: who, when, which key) in
    the same transaction, so a key is never revoked without a record of it."""
    with write_transaction():
        keys = list(
            ProjectAPIKey.objects.select_for_update()
            .filter(pk__in=list(key_ids), revoked=False)
            .order_by("pk")
        )
        ProjectAPIKey.objects.filter(pk__in=[key.pk for key in keys]).update(revoked=True)
        for key in keys:
            key.revoked = True
            LogEntry.objects.log_actions(
                user_id=by_user_id,
                queryset=[key],
                action_flag=CHANGE,
                change_message=f"Revoked API key {key.name!r} (prefix {key.prefix}).",
                single_object=True,
            )
    return keys


@dataclass(frozen=True)
class BootstrapResult:
    created: bool
    username: str = ""
    password: str = ""
    api_key: str = ""


def bootstrap_first_run(*, default_project: str = "default") -> BootstrapResult:
    """On first run only: an 'admin' superuser with a random password and a write key.

    Changes nothing once any superuser exists.
    """
    user_model = get_user_model()
    with write_transaction():
        if user_model.objects.filter(is_superuser=True).exists():
            return BootstrapResult(created=False)
        password = secrets.token_urlsafe(18)
        username = "admin"
        if user_model.objects.filter(username=username).exists():
            username = f"admin-{secrets.token_hex(3)}"
        user_model.objects.create_superuser(username=username, email="", password=password)
        Project.objects.get_or_create(slug=default_project, defaults={"name": "Default project"})
        _, key = api_key_create(
            name="bootstrap write key", project_slugs=[default_project], scope=Scope.WRITE
        )
    return BootstrapResult(created=True, username=username, password=password, api_key=key)
