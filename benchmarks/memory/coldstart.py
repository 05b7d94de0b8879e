"""The first compile in a new process, as a freshly started or forked worker serves it.

``cold_start_measure`` starts ``manage.py memory_benchmark --cold-start SLUG`` on the same
database; that process (``cold_start_run``) loads the tokenizer, compiles once over the stored
corpus (whatever that takes: building the index from the rows, or loading its snapshot, which
it says), then once more, and reports the times and its resident memory before and after: the
growth is what the index costs a worker.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from graph_app.compiler import context_compile
from graph_app.index_cache import compiler_cache_stats
from memoryproject.dbconfig import database_url_of
from memoryproject.models import Project
from memoryproject.tokens import count_tokens

BUDGET = 800
TIMEOUT_SECONDS = 1800


def memory_of(pid: int) -> dict[str, float]:
    """RSS and PSS of process ``pid`` in MiB (``/proc/<pid>/smaps_rollup``; empty if gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss"):
            found[f"{name.lower()}_mb"] = round(int(rest.split()[0]) / 1024, 1)
    return found


def rss_mb() -> float:
    """Resident memory of this process in MiB (Linux /proc; else the peak, from getrusage)."""
    rss = memory_of(os.getpid()).get("rss_mb")
    return rss if rss is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ms_since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def cold_start_run(slug: str, query: str) -> dict[str, Any]:
    """Runs in the new process: tokenizer, first compile, second compile, memory."""
    project = Project.objects.get(slug=slug)
    before = rss_mb()
    start = time.perf_counter()
    count_tokens("warm up")
    tokenizer_ms = _ms_since(start)
    loaded = rss_mb()
    start = time.perf_counter()
    first = context_compile(project=project, query=query, max_tokens=BUDGET)
    first_ms = _ms_since(start)
    after = rss_mb()
    start = time.perf_counter()
    context_compile(project=project, query=query, max_tokens=BUDGET)
    second_ms = _ms_since(start)
    stats = compiler_cache_stats(project.pk) or {}
    return {
        "from_snapshot": stats.get("restored", -1) >= 0,
        "rows_read": stats.get("rows_read"),
        "tokenizer_load_ms": tokenizer_ms,
        "first_compile_ms": first_ms,
        "second_compile_ms": second_ms,
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "index_mb": round(after - loaded, 1),
        "revision": first["revision"],
    }


def database_url() -> str:
    """The URL of the configured database, for a new process on it."""
    return database_url_of(connection.settings_dict)


def cold_start_measure(slug: str, *, query: str, snapshots: bool = True) -> dict[str, Any]:
    """Starts a new process on this database that compiles ``query`` over project ``slug``;
    answers its report plus the process's whole wall time (interpreter and Django start
    included). Without ``snapshots`` the process neither reads nor writes index snapshots: its
    first compile builds the index from the rows."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE")
        or settings.SETTINGS_MODULE,
    }
    if not snapshots:
        env["COMPILER_SNAPSHOT_DIR"] = ""
    command = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "memory_benchmark"]
    command += ["--cold-start", slug, "--query", query, "--json"]
    start = time.perf_counter()
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
    )
    wall_ms = _ms_since(start)
    if done.returncode != 0:
        raise RuntimeError(f"cold start process failed: {done.stderr.strip()[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    report["process_wall_ms"] = wall_ms
    return report
