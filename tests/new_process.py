"""The environment of a new interpreter a test starts as a deployment would start one: the
production settings on a SQLite file of the test's own, its own witness, no index snapshots."""

from __future__ import annotations

import os
from pathlib import Path


def new_process_env(
    tmp_path: Path, database: str, *, unset: tuple[str, ...] = (), **extra: str
) -> dict[str, str]:
    """This process's environment without the variables named in ``unset``, with ``extra``,
    and the settings of a new process on ``tmp_path / database``."""
    return {
        **{name: value for name, value in os.environ.items() if name not in unset},
        **extra,
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "SECRET_KEY": "test-only-secret-key-not-for-production-use-0123456789",
        "DATABASE_URL": f"sqlite:///{tmp_path / database}",
        "WITNESS_DIR": str(tmp_path / "witness"),
        "COMPILER_SNAPSHOT_DIR": "",
    }
