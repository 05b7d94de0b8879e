"""Files the service creates hold the memory or what signs for it: they are its owner's only
(0600, directories 0700), even when it is started from a shell whose umask is 022.

A fresh installation in a temporary directory: ``manage.py migrate`` makes the SQLite database,
then a process of the service writes a fact (the writer lock file), compiles (an index
snapshot) and takes a backup with ``backup_db --out``, and reports the modes of what it made
while its connection is open (SQLite removes ``-wal`` and ``-shm`` at the last close)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from memoryproject.filemodes import UMASK_DEFAULT, umask_parse

ROOT = Path(__file__).resolve().parents[2]
SHELL_UMASK = 0o022  # what a login shell typically leaves a process

REPORT = """
import json, os, stat
from pathlib import Path
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from graph_app.compiler import context_compile
from graph_app.fact_writes import fact_upsert
from graph_app.snapshot import snapshot_path
from memoryproject.models import Project

project = Project.objects.create(slug="modes", name="modes")
fact_upsert(project=project, subject_id="payment_service", predicate="depends_on",
            object_value="ledger_store")
context_compile(project=project, query="what does payment_service depend on", max_tokens=300)
out = Path(os.environ["BACKUP_OUT"])
call_command("backup_db", "--out", str(out), "--json")
db = Path(connection.settings_dict["NAME"])
paths = {
    "database": db, "wal": Path(f"{db}-wal"), "shm": Path(f"{db}-shm"),
    "writer": Path(f"{db}-writer"), "data directory": db.parent,
    "backup": out, "snapshot": snapshot_path(project.pk),
    "snapshot directory": snapshot_path(project.pk).parent,
    "secret key": Path(os.environ["SECRET_KEY_FILE"]),
    "secret key directory": Path(os.environ["SECRET_KEY_FILE"]).parent,
}
print("MODES " + json.dumps({k: oct(stat.S_IMODE(p.stat().st_mode)) for k, p in paths.items()}))
"""


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        umask=SHELL_UMASK,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _installation(root: Path, umask_setting: str | None) -> dict[str, str]:
    """The modes of what a new installation under ``root`` made."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SECRET_KEY", "MEMORY_", "COMPILER_", "WITNESS_", "DJANGO_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        DATABASE_URL=f"sqlite:///{root / 'data' / 'memory.sqlite3'}",
        SECRET_KEY_FILE=str(root / "keys" / "secret_key"),
        COMPILER_SNAPSHOT_DIR=str(root / "data" / "index"),
        COMPILER_SNAPSHOT_MIN_ROWS="1",
        WITNESS_DIR=str(root / "witness"),
        WITNESS_KEY_FILE=str(root / "keys" / "witness.key"),
        BACKUP_OUT=str(root / "backups" / "memory.sqlite3"),
    )
    if umask_setting is not None:
        env["MEMORY_UMASK"] = umask_setting
    (root / "backups").mkdir()
    _manage(env, "migrate", "--noinput")
    out = _manage(env, "shell", "-c", REPORT)
    line = next(line for line in out.splitlines() if line.startswith("MODES "))
    modes: dict[str, str] = json.loads(line.removeprefix("MODES "))
    return modes


@pytest.fixture(scope="module")
def modes(tmp_path_factory):
    return _installation(tmp_path_factory.mktemp("installation"), None)


@pytest.mark.parametrize(
    "name",
    ["database", "wal", "shm", "writer", "backup", "snapshot", "secret key"],
)
def test_every_file_the_service_makes_is_readable_by_its_owner_only(modes, name):
    assert modes[name] == "0o600", modes


@pytest.mark.parametrize("name", ["data directory", "snapshot directory", "secret key directory"])
def test_every_directory_the_service_makes_is_its_owners_only(modes, name):
    assert modes[name] == "0o700", modes


def test_with_the_umask_inherited_the_files_it_writes_itself_stay_private(tmp_path):
    """``MEMORY_UMASK=inherit`` leaves the process's umask (022 here) for what libraries
    create, the database among them; backups, snapshots and the secret key are created 0600
    whatever the umask."""
    modes = _installation(tmp_path, "inherit")
    assert modes["database"] == "0o644", modes
    assert modes["wal"] == modes["shm"] == "0o644", modes
    for name in ("backup", "snapshot", "secret key", "writer"):
        assert modes[name] == "0o600", (name, modes)


@pytest.mark.parametrize(
    ("value", "mask"),
    [("", UMASK_DEFAULT), (" ", UMASK_DEFAULT), ("inherit", None), ("027", 0o027), ("0o27", 0o027)],
)
def test_memory_umask_reads_an_octal_mask_or_inherit(value, mask):
    assert umask_parse(value) == mask


@pytest.mark.parametrize("value", ["off", "8", "0x1f", "77777", "-1", "0o"])
def test_memory_umask_refuses_anything_else_naming_itself(value):
    with pytest.raises(ImproperlyConfigured, match="MEMORY_UMASK"):
        umask_parse(value)
