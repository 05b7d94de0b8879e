"""How an environment variable's text is read, the same for the Django settings and for the
REST API server's own options (``memoryproject.server``, read before Django is set up)."""

from __future__ import annotations

import environ


class Env(environ.Env):
    # Exactly the words .env.example documents as "on" (a number is on unless it is 0).
    BOOLEAN_TRUE_STRINGS = ("true", "on", "yes", "1")


def flag(value: str | None, default: bool) -> bool:
    """An on/off variable's ``value`` as the settings read one; ``default`` when it is unset or
    blank (as .env.example's lines may leave them)."""
    if value is None or not value.strip():
        return default
    return bool(Env.parse_value(value.strip(), bool))
