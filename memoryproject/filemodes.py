"""Files the service makes are readable by its owner only.

The SQLite database and the ``-wal``, ``-shm`` and ``-writer`` files beside it, backups, index
snapshots, exports and the secret key hold the memory or what signs for it. Every door
(``manage.py`` and its commands, ``mcp_serve`` among them; the WSGI and ASGI applications;
the REST API server's main process with the preloaded application, or each worker without it)
imports the settings before it creates a file of the service, and the settings' first act is
``umask_apply``: from then on the process creates files 0600 and directories 0700, whichever
library does it (SQLite creates the database and gives its journals the database's mode).
``MEMORY_UMASK`` sets another mask, or ``inherit`` keeps the one the process started with.

The files the service writes itself (backups, snapshots, the secret key) are also created 0600
explicitly, so they stay private whatever the mask, when the code runs inside a process that
set its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

UMASK_DEFAULT = 0o077
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
INHERIT = "inherit"


def umask_parse(value: str) -> int | None:
    """The mask ``MEMORY_UMASK`` asks for: empty, the default (077); ``inherit``, none (the
    process's stays); else an octal number such as ``027`` or ``0o027``."""
    text = value.strip().lower()
    if not text:
        return UMASK_DEFAULT
    if text == INHERIT:
        return None
    digits = text.removeprefix("0o")
    if not digits or len(digits) > 4 or any(c not in "01234567" for c in digits):
        raise ImproperlyConfigured(
            f"MEMORY_UMASK must be an octal mask such as 077, or {INHERIT!r}; got {value!r}"
        )
    return int(digits, 8) & 0o777


def umask_apply(value: str) -> int | None:
    """Sets the process's umask as ``MEMORY_UMASK`` (``value``) asks; answers it (None:
    inherited, left as it was)."""
    mask = umask_parse(value)
    if mask is not None:
        os.umask(mask)
    return mask


def private_file_create(path: Path) -> None:
    """Creates ``path`` empty, with mode 0600 at most whatever the umask; fails if it exists."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE))
