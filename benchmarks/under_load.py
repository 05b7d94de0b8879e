"""The busy machine of the "under load" figures, made the same way by every benchmark command.

``--under-load N`` keeps N more processes busy for as long as the measurement runs, each
spinning one core in a pure-Python loop (``while True: pass``: no memory, no disk, no lock
shared with what is measured), each in a session of its own. On a 2-core machine, two of them
leave what is measured about a third of the machine's time instead of half of it or more: where
the kernel shares the cores out by session first (Linux's autogroup), that third goes to the
measured session as a whole, so a server of two processes gets about 0.6 of a core for both,
not 0.6 each (docs/benchmarks.md, "what a busy machine gives a server"). The result carries
``under_load`` (how many processes spun, on how many cores) and the table says it in one line,
so a figure read later tells the load it was taken under.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management.base import CommandError, CommandParser

#: What each busy process runs.
SPIN = "while True:\n    pass\n"

#: The most busy processes a run may ask for.
MOST = 64


def under_load_add(parser: CommandParser) -> None:
    """Adds ``--under-load N`` (0: the machine as it is)."""
    parser.add_argument(
        "--under-load",
        type=int,
        default=0,
        metavar="N",
        help="measure with N more processes each spinning one core (0: none)",
    )


def under_load_option(options: dict[str, Any]) -> int:
    """The number of busy processes asked for; a CommandError naming ``--under-load`` unless
    it is from 0 to ``MOST``."""
    value = options.get("under_load") or 0
    if not isinstance(value, int) or not 0 <= value <= MOST:
        raise CommandError(f"--under-load: must be an integer from 0 to {MOST}")
    return value


@contextmanager
def spinning(processes: int) -> Iterator[list[int]]:
    """Runs the block with ``processes`` more processes each spinning one core; answers their
    process ids. They are killed and reaped when the block ends, however it ends."""
    if processes < 0:
        raise ValueError("processes: must be at least 0")
    started: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(processes):
            started.append(
                subprocess.Popen(
                    [sys.executable, "-c", SPIN],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # a Ctrl-C at the terminal reaches the command only
                )
            )
        yield [process.pid for process in started]
    finally:
        for process in started:
            process.kill()
        for process in started:
            process.wait()


def under_load_note(result: dict[str, Any], processes: int) -> dict[str, Any]:
    """``result`` with ``under_load``: the busy processes it was measured beside."""
    result["under_load"] = {"spinning_processes": processes, "cpus": os.cpu_count()}
    return result


def under_load_line(result: dict[str, Any]) -> str:
    """The table's line saying the load a result was measured under."""
    load = result.get("under_load") or {}
    processes = load.get("spinning_processes", 0)
    if not processes:
        return "load: none added (--under-load 0)"
    return (
        f"under load: {processes} more process(es) each spinning one core, "
        f"on {load.get('cpus')} core(s) (--under-load {processes})"
    )
