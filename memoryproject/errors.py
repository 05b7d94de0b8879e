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
