"""Choosing the project of a call: the one convention every memory endpoint and tool uses.

Every call acts as an identity: an API key (REST, MCP over HTTP, MCP over stdio started with
``--api-key``) or a local identity (MCP over stdio started with ``--project P --scope S``, for a
trusted user of this machine). Both are bound to projects with a scope, and both go through
`project_resolve`, so REST and MCP answer alike.

Writes name the project in the body, reads in the ``project`` query parameter. When absent, the
identity's single project is used (or ``default`` when it has several and ``default`` is one of
them). An identity that may not use the named project gets 404 for reads (the items are
invisible to it) and 403 for writes, whether or not the project exists. Management commands
run by the machine's operator pass no identity: they may use any existing project. No call ever
creates a project: ``manage.py create_project`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import ValidationError

from memoryproject import sql
from memoryproject.errors import ApplicationError, NotFoundError, PermissionDeniedError
from memoryproject.models import SCOPE_RANK, Project, ProjectAPIKey, Scope, slug_validator

Access = Literal["read", "write"]


def validate_project_slug(slug: str) -> str:
    slug = slug.strip()
    try:
        slug_validator(slug)
    except ValidationError as exc:
        raise ApplicationError(f"project: {exc.messages[0]}", field="project") from exc
    return slug


def create_hint(slug: str) -> str:
    return f"create it with `python manage.py create_project {slug}`"


def project_get(slug: str) -> Project:
    """An existing project, or a 404 naming the field and how to create it."""
    try:
        return Project.objects.get(slug=slug)
    except Project.DoesNotExist as exc:
        raise NotFoundError(
            f"project: no project '{slug}'; {create_hint(slug)}", field="project"
        ) from exc


@dataclass(frozen=True)
class LocalIdentity:
    """A trusted local process acting on one project with one scope, chosen when it started
    (``mcp_serve --project P --scope S``). Receipts name it ``local:<project>/<scope>``."""

    project: str
    scope: str

    def allows(self, scope: str) -> bool:
        return SCOPE_RANK[Scope(self.scope)] >= SCOPE_RANK[Scope(scope)]

    @property
    def label(self) -> str:
        return f"local:{self.project}/{self.scope}"

    def allowed_projects(self) -> list[Project]:
        return list(Project.objects.filter(slug=self.project))


#: Who a call acts as: an API key or a local identity.
Identity = ProjectAPIKey | LocalIdentity


def _project_columns(alias: str) -> str:
    return ", ".join(f"{alias}." + sql.column(Project, f) for f in sql.field_names(Project))


@cache
def _key_link() -> tuple[str, str, str]:
    """The table linking keys to projects, with its key and its project column (quoted)."""
    link = ProjectAPIKey._meta.get_field("projects")
    through = link.remote_field.through
    assert through is not None
    key_column = sql.quote(link.m2m_column_name())
    project_column = sql.quote(link.m2m_reverse_name())
    return sql.table(through), key_column, project_column


@cache
def _projects_of_key_sql() -> str:
    """The projects an API key is bound to, in one statement over the link table."""
    link, key_column, project_column = _key_link()
    return (
        f"SELECT {_project_columns('p')} "
        f"FROM {sql.table(Project)} p JOIN {link} k "
        f"ON k.{project_column} = p.{sql.column(Project, 'pk')} WHERE k.{key_column} = %s "
        f"ORDER BY p.{sql.column(Project, 'slug')}"
    )


@cache
def _key_with_projects_sql() -> str:
    """The API key of a prefix and, one row each, the projects it is bound to (a key bound to
    none: one row, the project's columns NULL)."""
    link, key_column, project_column = _key_link()
    key_columns = ", ".join(
        "a." + sql.column(ProjectAPIKey, f) for f in sql.field_names(ProjectAPIKey)
    )
    return (
        f"SELECT {key_columns}, {_project_columns('p')} FROM {sql.table(ProjectAPIKey)} a "
        f"LEFT JOIN {link} k ON k.{key_column} = a.{sql.column(ProjectAPIKey, 'pk')} "
        f"LEFT JOIN {sql.table(Project)} p ON p.{sql.column(Project, 'pk')} = k.{project_column} "
        f"WHERE a.{sql.column(ProjectAPIKey, 'prefix')} = %s "
        f"ORDER BY p.{sql.column(Project, 'slug')}"
    )


def key_with_projects(prefix: str) -> ProjectAPIKey | None:
    """The API key with ``prefix``, its bound projects read in the same statement and kept on
    it as ``bound_projects`` for the call it authenticates (``project_resolve`` then reads
    them from there). A key is verified anew for every call, so they are never older than it.

    The key and its projects are made once per process for the rows exactly as stored: a row
    changed in any way since (a revocation, a new expiry or scope, a project bound, renamed or
    unbound) is read into new ones, never answered from memory. Callers only read them."""
    rows = sql.fetch(_key_with_projects_sql(), [prefix])
    if not rows:
        return None
    try:
        return _key_kept(tuple(map(tuple, rows)))
    except TypeError:  # a column the driver answers unhashable: not kept
        return _key_of(rows)


@lru_cache(maxsize=256)
def _key_kept(rows: tuple[tuple[Any, ...], ...]) -> ProjectAPIKey:
    return _key_of(rows)


def _key_of(rows: Sequence[Sequence[Any]]) -> ProjectAPIKey:
    key_fields, project_fields = sql.field_names(ProjectAPIKey), sql.field_names(Project)
    split = len(key_fields)
    api_key = sql.instance_from(ProjectAPIKey, key_fields, rows[0][:split])
    api_key.bound_projects = tuple(  # type: ignore[attr-defined]
        sql.instance_from(Project, project_fields, row[split:])
        for row in rows
        if row[split] is not None
    )
    return api_key


def _allowed(identity: Identity) -> list[Project]:
    if isinstance(identity, LocalIdentity):
        return identity.allowed_projects()
    bound = getattr(identity, "bound_projects", None)
    if bound is not None:
        return list(bound)
    fields = sql.field_names(Project)
    return sql.instances(Project, fields, _projects_of_key_sql(), [identity.pk])


def project_resolve(
    *, slug: str | None, api_key: Identity | None, access: Access = "read"
) -> Project:
    """The project a call acts on, or an error naming the ``project`` field.

    ``api_key`` is the caller's identity (an API key or a local identity); None only for
    management commands run by the machine's operator, which may use any existing project."""
    if slug is not None and not isinstance(slug, str):
        raise ApplicationError("project: must be a string (a project slug)", field="project")
    if api_key is None:
        return project_get(validate_project_slug(slug) if slug else settings.MEMORY_DEFAULT_PROJECT)

    if access == "write" and not api_key.allows(Scope.WRITE):
        raise PermissionDeniedError(
            f"this {_kind(api_key)} has scope '{api_key.scope}'; "
            "writes need scope 'write' or 'admin'"
        )
    allowed = _allowed(api_key)
    if not slug:
        if len(allowed) == 1:
            return allowed[0]
        for project in allowed:
            if project.slug == settings.MEMORY_DEFAULT_PROJECT:
                return project
        if not allowed:
            raise NotFoundError(f"project: this {_kind(api_key)} has no project", field="project")
        raise ApplicationError(
            f"project: required, because this {_kind(api_key)} is bound to several projects ("
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
            f"project: this {_kind(api_key)} may not write to project '{slug}'", field="project"
        )
    raise NotFoundError(f"project: no project '{slug}' for this {_kind(api_key)}", field="project")


def _kind(identity: Identity) -> str:
    return "local identity" if isinstance(identity, LocalIdentity) else "API key"


def projects_visible_to(api_key: Identity | None) -> list[Project]:
    if api_key is None:
        return list(Project.objects.all())
    return _allowed(api_key)
