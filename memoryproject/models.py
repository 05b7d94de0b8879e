"""Projects and project-bound API keys.

Every memory item belongs to a project. A key is bound to one or more projects with one scope:
read < write < admin. The key itself is shown once; only its SHA-512 hash and a visible prefix
are stored (djangorestframework-api-key).
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from rest_framework_api_key.models import AbstractAPIKey

SLUG_RULE = "lower-case letters, digits, '-', '_' and '.', starting with a letter or digit, at most 64 characters"
slug_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_.-]{0,63}$", f"project slug must use {SLUG_RULE}"
)


class Project(models.Model):
    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Scope(models.TextChoices):
    READ = "read", "read"
    WRITE = "write", "write"
    ADMIN = "admin", "admin"


SCOPE_RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.ADMIN: 2}


class ProjectAPIKey(AbstractAPIKey):
    projects = models.ManyToManyField(Project, related_name="api_keys")
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API key"
        verbose_name_plural = "API keys"

    def allows(self, scope: str) -> bool:
        return SCOPE_RANK[Scope(self.scope)] >= SCOPE_RANK[Scope(scope)]

    @property
    def label(self) -> str:
        return f"api_key:{self.prefix} ({self.name})"
