"""A small progress bar for long command phases, drawn on stderr (stdout carries results)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

T = TypeVar("T")


def progress(
    items: Iterable[T], *, total: int, label: str, stream: TextIO | None = None, width: int = 30
) -> Iterator[T]:
    """Yields ``items`` while redrawing ``label [#####.....] n/total`` at most ten times a
    second; when stderr is not a terminal (logs, CI) only the final line is written."""
    out = stream if stream is not None else sys.stderr
    interactive = stream is not None or out.isatty()
    last = 0.0
    done = 0
    start = time.monotonic()

    def draw(final: bool = False) -> None:
        filled = int(width * done / total) if total else width
        elapsed = time.monotonic() - start
        out.write(
            f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:.1f}s"
        )
        if final:
            out.write("\n")
        out.flush()

    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if interactive and now - last > 0.1:
            last = now
            draw()
    draw(final=True)
