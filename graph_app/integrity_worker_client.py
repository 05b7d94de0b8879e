"""A full verification's side of the integrity worker (graph_app.integrity_worker, a second
process): starting it on a large project's facts in this verification's snapshot, and taking
its digests back only when it read the graph head this verification reads.
"""

from __future__ import annotations

import logging
import marshal
import os
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.db import connection

from graph_app.graph_head import graph_head, graph_head_statement
from graph_app.merkle_leaves import fact_statement
from memoryproject.domain.hashing import RecordDigests
from memoryproject.models import Project

logger = logging.getLogger(__name__)


#: Seconds a full verification waits for its fact worker before reading the facts itself.
_WORKER_TIMEOUT = 600


def fact_worker_start(project: Project) -> tuple[subprocess.Popen[bytes], list[Any]] | None:
    """Starts a worker reading and hashing the project's facts, and answers it with the
    graph head this snapshot reads: the worker reads in this transaction's snapshot on
    PostgreSQL (exported), in a snapshot of its own on SQLite, which ``fact_worker_digests``
    holds to this one by that head. None when the
    project is below INTEGRITY_WORKER_MIN_CHANGES, the database is one a second connection
    cannot share (in memory; not SQLite or PostgreSQL) or the worker cannot start.
    Verification then reads them itself."""
    minimum = settings.INTEGRITY_WORKER_MIN_CHANGES
    if minimum <= 0 or connection.vendor not in ("sqlite", "postgresql"):
        return None
    read = graph_head(project)
    if read.changes < minimum:
        return None
    head = [read.revision, read.changes, read.head_hash]  # as the worker reads the row
    sql, params = fact_statement(project)
    head_sql, head_params = graph_head_statement(project)
    job: dict[str, Any] = {
        "vendor": connection.vendor,
        "sql": sql,
        "params": list(params),
        "head_sql": head_sql,
        "head_params": list(head_params),
        "project": project.slug,
    }
    if connection.vendor == "sqlite":
        if connection.is_in_memory_db():  # type: ignore[attr-defined]  # SQLite's wrapper
            return None
        job["database"] = os.path.abspath(connection.settings_dict["NAME"])
    else:
        with connection.cursor() as cursor:  # exported for the transaction's lifetime
            cursor.execute("SELECT pg_export_snapshot()")
            job["snapshot"] = cursor.fetchone()[0]
        job["database"] = {
            name: value
            for name, value in connection.get_connection_params().items()
            if type(value) in (str, int)
        }
    path = os.pathsep.join(filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")]))
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", "graph_app.integrity_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
    except OSError as error:
        logger.warning("integrity worker not started (%s): facts read in process", error)
        return None
    stdin, worker.stdin = worker.stdin, None  # closed here: communicate() only reads
    assert stdin is not None
    try:
        with stdin:
            stdin.write(marshal.dumps(job))
    except OSError:
        pass  # it ended already: its exit status and stderr say why
    return worker, head


def fact_worker_digests(worker: subprocess.Popen[bytes], here: list[Any]) -> RecordDigests | None:
    """The worker's digests of the facts, when it read them at the graph head this
    verification reads; None (logged) if it failed or read another head (a write committed
    between the two snapshots): verification then reads them itself."""
    try:
        out, err = worker.communicate(timeout=_WORKER_TIMEOUT)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.communicate()
        logger.warning("integrity worker ran over %s s: facts read in process", _WORKER_TIMEOUT)
        return None
    if worker.returncode == 0:
        try:
            head, *columns = marshal.loads(out)
            digests = RecordDigests(*columns)
        except (EOFError, ValueError, TypeError):
            pass
        else:
            if list(head or []) != here:
                logger.info(
                    "integrity worker %s read the graph at head %s, not %s (a write came "
                    "between): facts read in process",
                    worker.pid,
                    head,
                    here,
                )
                return None
            logger.debug("integrity worker %s read %d facts", worker.pid, len(digests.ids))
            return digests
    detail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    logger.warning(
        "integrity worker failed (exit %s: %s): facts read in process",
        worker.returncode,
        detail[0],
    )
    return None
