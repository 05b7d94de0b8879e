"""The one domain error type.

Services raise ApplicationError (or a subclass) with a message that names the field and the rule.
DRF turns it into a JSON response with the matching status; MCP turns it into a tool result with
isError. Nothing else should be raised on purpose for bad input.
"""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    status_code = 400
    code = "invalid"

    def __init__(
        self, message: str, *, field: str | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.extra = extra or {}

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field:
            body["fields"] = {self.field: [self.message]}
        body.update(self.extra)
        return body


class NotFoundError(ApplicationError):
    status_code = 404
    code = "not_found"


class PermissionDeniedError(ApplicationError):
    status_code = 403
    code = "permission_denied"


class ConflictError(ApplicationError):
    status_code = 409
    code = "conflict"


def validation_error(field: str, rule: str) -> ApplicationError:
    """An ApplicationError whose message reads ``<field>: <rule>``."""
    return ApplicationError(f"{field}: {rule}", field=field)


class PayloadTooLargeError(ApplicationError):
    status_code = 413
    code = "too_large"


#: The ``code`` of an error answer by HTTP status, for errors raised outside the service layer
#: (routing, methods, body size, server errors).
STATUS_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "throttled",
    500: "server_error",
}


def error_body(status: int, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON error shape every /v1 answer ≥ 400 has: ``{"code", "message", "fields"?}``."""
    body: dict[str, Any] = {"code": STATUS_CODES.get(status, "error"), "message": message}
    if field:
        body["fields"] = {field: [message]}
    return body
