"""A project's index snapshot written by a process of its own, so that no compile waits for it
and no serving process keeps what writing it makes.

Writing the snapshot of an index that was itself restored from a snapshot makes every document
again from the mapped columns: at 100k facts about 10 s of CPU, during which the compile that
crossed ``COMPILER_SNAPSHOT_MIN_ROWS`` held its project's index lock, and the process kept the
documents it made (measured on 2026-12-04: 177 MB of RSS before, 648 MB after). The process
that crosses the threshold now starts ``manage.py compiler_snapshot --project <slug>`` instead,
on the same database, snapshot directory and signing key, and goes on serving.

One writer per project at a time: each holds an exclusive lock on ``<snapshot>.lock`` while it
reads and writes; another finding it held leaves the work to it. Forgetting a project's
snapshot (an erasure) takes the same lock, so it deletes what a writer was writing once that
writer is done, never before.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from memoryproject.dbconfig import database_url_of
from memoryproject.filemodes import PRIVATE_DIR

log = logging.getLogger(__name__)

_SETTINGS = "memoryproject.settings"


def writer_lock_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name + ".lock")


@contextmanager
def writer_lock(snapshot: Path, *, wait: bool) -> Iterator[bool]:
    """Holds the exclusive lock of ``snapshot``'s writer; yields whether it was had (without
    ``wait``, False at once when another process holds it)."""
    snapshot.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    fd = os.open(writer_lock_path(snapshot), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def snapshot_in_background(slug: str) -> subprocess.Popen[bytes] | None:
    """Starts the writer of project ``slug``'s snapshot (``manage.py compiler_snapshot``) on
    this process's settings, database, snapshot directory and signing key; answers it, or None when it
    could not start (logged: the next threshold crossed tries again). It logs to this process's
    standard error; its exit is collected by a thread of this process."""
    command = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "compiler_snapshot"]
    command += ["--project", slug, "--snapshot-dir", str(settings.COMPILER_SNAPSHOT_DIR)]
    # Each server counts the rows it reads itself: several crossing the threshold for the same
    # rows start one writer each, and the first to run leaves the others nothing to write.
    command += ["--min-rows", str(settings.COMPILER_SNAPSHOT_MIN_ROWS)]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": (
            os.environ.get("DJANGO_SETTINGS_MODULE") or settings.SETTINGS_MODULE or _SETTINGS
        ),
        "DATABASE_URL": database_url_of(connections[DEFAULT_DB_ALIAS].settings_dict),
        "SECRET_KEY": settings.SECRET_KEY,  # the snapshot's signing key derives from it
    }
    try:
        process = subprocess.Popen(
            command,
            cwd=str(settings.BASE_DIR),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # an MCP server's standard output carries the protocol
            start_new_session=True,  # a Ctrl-C meant for the server does not cut a write short
        )
    except Exception as exc:  # the compile that made it due is served whatever
        log.warning(
            "compiler index snapshot of project %s: its writer did not start: %s", slug, exc
        )
        return None
    threading.Thread(
        target=_collect, args=(process, slug), name="snapshot-writer", daemon=True
    ).start()
    return process


def _collect(process: subprocess.Popen[bytes], slug: str) -> None:
    code = process.wait()
    if code != 0:
        log.warning("compiler index snapshot of project %s: its writer exited with %d", slug, code)
