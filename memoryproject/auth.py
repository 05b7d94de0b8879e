"""API-key authentication for /v1: ``Authorization: Bearer <key>``.

``Api-Key <key>`` (the djangorestframework-api-key convention) is accepted too. A missing key
answers 401; an unknown, revoked or expired key answers 401; a key without the scope a call
needs answers 403.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from memoryproject.models import ProjectAPIKey, Scope

KEYWORDS = {"bearer", "api-key"}


class KeyPrincipal:
    """The 'user' of a request authenticated by API key."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, api_key: ProjectAPIKey) -> None:
        self.api_key = api_key

    def __str__(self) -> str:
        return self.api_key.label


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[KeyPrincipal, ProjectAPIKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        keyword, _, key = header.strip().partition(" ")
        if keyword.lower() not in KEYWORDS or not key.strip():
            raise exceptions.AuthenticationFailed(
                "Authorization header must be 'Bearer <api key>'."
            )
        key = key.strip()
        prefix, _, _ = key.partition(".")
        try:
            api_key = ProjectAPIKey.objects.get(prefix=prefix)
        except ProjectAPIKey.DoesNotExist as exc:
            raise exceptions.AuthenticationFailed("Unknown API key.") from exc
        if not api_key.is_valid(key):
            raise exceptions.AuthenticationFailed("Unknown API key.")
        if api_key.revoked:
            raise exceptions.AuthenticationFailed("This API key has been revoked.")
        if api_key.has_expired:
            raise exceptions.AuthenticationFailed("This API key has expired.")
        return KeyPrincipal(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="memoryproject"'


class HasProjectApiKey(permissions.BasePermission):
    """A valid key is required; safe methods need scope read, others write.

    A view may set ``required_scope`` ("read" for a POST that only reads, e.g. compile).
    """

    message = "A valid API key is required: send 'Authorization: Bearer <api key>'."

    def has_permission(self, request: Request, view: Any) -> bool:
        api_key = request.auth
        if not isinstance(api_key, ProjectAPIKey):
            return False
        required = getattr(view, "required_scope", None) or (
            Scope.READ if request.method in permissions.SAFE_METHODS else Scope.WRITE
        )
        if not api_key.allows(required):
            self.message = (
                f"This API key has scope '{api_key.scope}'; this call needs scope '{required}'."
            )
            return False
        return True


def api_key_of(request: Request) -> ProjectAPIKey | None:
    return request.auth if isinstance(request.auth, ProjectAPIKey) else None


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Describes the Bearer API key in the OpenAPI schema (and the Swagger UI's Authorize)."""

    target_class = "memoryproject.auth.ApiKeyAuthentication"
    name = "ApiKeyBearer"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return build_bearer_security_scheme_object(
            header_name="HTTP_AUTHORIZATION", token_prefix="Bearer", bearer_format="prefix.secret"
        )
