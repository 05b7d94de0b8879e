"""System checks of the audit trail: ``manage.py check`` (and every command that runs checks)
fails when the injection log would be kept for less than the law asks."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from audit_app.domain.chain import MINIMUM_RETENTION_DAYS


@register()
def retention_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    days = getattr(settings, "AUDIT_RETENTION_DAYS", MINIMUM_RETENTION_DAYS)
    if isinstance(days, int) and days >= MINIMUM_RETENTION_DAYS:
        return []
    return [
        Error(
            f"AUDIT_RETENTION_DAYS is {days}: injection records must be kept at least "
            f"{MINIMUM_RETENTION_DAYS} days (six months; EU AI Act Art. 19 and 26(6)).",
            hint=f"Set AUDIT_RETENTION_DAYS to {MINIMUM_RETENTION_DAYS} or more, or leave it unset.",
            id="audit_app.E001",
        )
    ]
