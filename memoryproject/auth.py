"""API-key authentication for /v1: ``Authorization: Bearer <key>``.

``Api-Key <key>`` (the djangorestframework-api-key convention) is accepted too. A missing key
answers 401; an unknown, revoked or expired key answers 401; a key without the scope a call
needs answers 403. Refused keys are counted per client address and key prefix
(memoryproject.throttling): past the limit the address or prefix is answered 429. MCP over
HTTP and stdio check keys with the same `api_key_verify` (memoryproject.api_keys, which
imports no REST framework).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from memoryproject.api_keys import KeyRefused, api_key_verify
from memoryproject.errors import ApplicationError
from memoryproject.models import ProjectAPIKey, Scope
from memoryproject.throttling import auth_failure_record, auth_retry_after, key_prefix_of

KEYWORDS = {"bearer", "api-key"}


def client_address(request: Request) -> str:
    """The client's address: the peer's, or the client a trusted proxy forwards for
    (``TrustedProxyMiddleware`` has rewritten REMOTE_ADDR)."""
    return str(request.META.get("REMOTE_ADDR") or "")


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
        address, prefix = client_address(request), key_prefix_of(key)
        wait = auth_retry_after(address=address, prefix=prefix)
        if wait is not None:
            raise exceptions.Throttled(
                wait=wait, detail="Too many failed authentications from this address or key."
            )
        try:
            if keyword.lower() not in KEYWORDS or not key.strip():
                raise KeyRefused("Authorization header must be 'Bearer <api key>'.")
            api_key = api_key_verify(key)
        except KeyRefused as exc:
            auth_failure_record(address=address, prefix=prefix)
            raise exceptions.AuthenticationFailed(str(exc)) from exc
        return KeyPrincipal(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="memoryproject"'


class HasProjectApiKey(permissions.BasePermission):
    """A valid key is required; safe methods need scope read, others write.

    A view may set ``required_scope`` ("read" for a POST that only reads, e.g. compile). A write
    names its project in the JSON body: a ``project`` in its query string is refused (400)
    rather than ignored, so a caller never writes to another project than the one it meant.
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
        writes = required != Scope.READ and request.method not in permissions.SAFE_METHODS
        if writes and "project" in request.query_params:
            raise ApplicationError(
                "project: a write names its project in the JSON body, not in the query "
                "string; remove '?project=' and send {\"project\": ...}",
                field="project",
            )
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
