"""The key that signs checkpoints of the hash chains (HMAC-SHA256), from the environment only:
a key kept in the database would let whoever rewrites the tables sign the rewrite."""

from __future__ import annotations

from django.conf import settings

from memoryproject.errors import ApplicationError

#: The shortest checkpoint key accepted (HMAC-SHA256 keys shorter than this are guessable).
MINIMUM_KEY_LENGTH = 32


def checkpoint_key() -> str:
    """The checkpoint signing key, from the environment only (never the database)."""
    key = str(getattr(settings, "AUDIT_CHECKPOINT_KEY", "") or "")
    if not key:
        raise ApplicationError(
            "AUDIT_CHECKPOINT_KEY is not set: checkpoints are signed (HMAC-SHA256) with a key "
            "kept outside the database; set it in the environment of this command, e.g. "
            "AUDIT_CHECKPOINT_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(48))')"
        )
    if len(key) < MINIMUM_KEY_LENGTH:
        raise ApplicationError(
            f"AUDIT_CHECKPOINT_KEY is too short ({len(key)} characters): use at least "
            f"{MINIMUM_KEY_LENGTH} random characters"
        )
    return key
