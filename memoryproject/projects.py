"""Choosing the project of a call: the one convention every memory endpoint and tool uses.

Writes name the project in the body, reads in the ``project`` query parameter. When absent, the
key's single project is used (or ``default`` when the key has several and ``default`` is one of
them). A key that may not use the named project gets 404 for reads (the items are invisible to
it) and 403 for writes. Local trusted callers (MCP over stdio, management commands) have no key:
they may use any project, and a write to a project that does not exist yet creates it.
"""

from __future__ import annotations

from typing import Literal

from django.conf import settings
from django.core.exceptions import ValidationError

from memoryproject.errors import ApplicationError, NotFoundError, PermissionDeniedError
from memoryproject.models import Project, ProjectAPIKey, Scope, slug_validator

Access = Literal["read", "write"]


def validate_project_slug(slug: str) -> str:
    slug = slug.strip()
    try:
        slug_validator(slug)
    except ValidationError as exc:
        raise ApplicationError(f"project: {exc.messages[0]}", field="project") from exc
    return slug


def project_resolve(
    *, slug: str | None, api_key: ProjectAPIKey | None, access: Access = "read"
) -> Project:
    """The project a call acts on, or an error naming the ``project`` field."""
    if slug is not None and not isinstance(slug, str):
        raise ApplicationError("project: must be a string (a project slug)", field="project")
    if api_key is None:
        slug = validate_project_slug(slug) if slug else settings.MEMORY_DEFAULT_PROJECT
        if access == "write":
            project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
            return project
        try:
            return Project.objects.get(slug=slug)
        except Project.DoesNotExist as exc:
            raise NotFoundError(f"project: no project '{slug}'", field="project") from exc

    allowed = list(api_key.projects.all())
    if access == "write" and not api_key.allows(Scope.WRITE):
        raise PermissionDeniedError(
            f"this API key has scope '{api_key.scope}'; writes need scope 'write' or 'admin'"
        )
    if not slug:
        if len(allowed) == 1:
            return allowed[0]
        for project in allowed:
            if project.slug == settings.MEMORY_DEFAULT_PROJECT:
                return project
        raise ApplicationError(
            "project: required, because this API key is bound to several projects ("
            + ", ".join(p.slug for p in allowed)
            + ")",
            field="project",
        )
    slug = validate_project_slug(slug)
    for project in allowed:
        if project.slug == slug:
            return project
    if access == "write":
        raise PermissionDeniedError(
            f"project: this API key may not write to project '{slug}'", field="project"
        )
    raise NotFoundError(f"project: no project '{slug}' for this API key", field="project")


def projects_visible_to(api_key: ProjectAPIKey | None) -> list[Project]:
    if api_key is None:
        return list(Project.objects.all())
    return list(api_key.projects.all())
