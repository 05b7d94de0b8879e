"""How the graph and the compiler grow with the corpus: one benchmark per size, from the
smallest up, each with a cold start in a new process, summed up as a table and a log-log chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.memory.plot import Panel, Series, loglog_svg
from benchmarks.memory.run import run_benchmark

# The sweep table's columns: (key, heading, width).
COLUMNS = (
    ("facts", "facts", 9),
    ("compile_p50_ms", "cmp p50", 9),
    ("compile_p95_ms", "cmp p95", 9),
    ("reference_p50_ms", "ref p50", 9),
    ("reference_p95_ms", "ref p95", 9),
    ("ratio_p50", "x p50", 7),
    ("ratio_p95", "x p95", 7),
    ("entity_query_p50_ms", "eq p50", 9),
    ("entity_query_p95_ms", "eq p95", 9),
    ("cold_rebuild_ms", "build ms", 10),
    ("cold_first_compile_ms", "cold ms", 9),
    ("cold_from_snapshot", "snap", 6),
    ("index_mb", "idx MB", 8),
    ("worker_rss_mb", "RSS MB", 8),
)

# The chart's panels, each against the facts: (title, unit, its lines as (key, label)).
PANELS = (
    (
        "Latency",
        "ms",
        (
            ("compile_p50_ms", "compile p50"),
            ("compile_p95_ms", "compile p95"),
            ("reference_p50_ms", "in-memory reference p50"),
            ("entity_query_p50_ms", "entity query p50"),
            ("entity_query_p95_ms", "entity query p95"),
            ("cold_rebuild_ms", "new process: index built"),
            ("cold_first_compile_ms", "new process: first compile"),
        ),
    ),
    (
        "Memory of a worker",
        "MiB",
        (("index_mb", "index (RSS growth)"), ("worker_rss_mb", "worker RSS")),
    ),
)


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The figures of one size that the table and the chart show."""
    operations, reference = report["operations"], report["reference"]
    cold = report.get("cold_start") or {}
    rebuilt = cold.get("rebuilt_from_rows") or {}
    return {
        "scale": report["scale"],
        "facts": report["corpus"]["facts"],
        "episodes": report["corpus"]["episodes"],
        "compile_p50_ms": operations["compile_context"]["p50_ms"],
        "compile_p95_ms": operations["compile_context"]["p95_ms"],
        "reference_p50_ms": reference["compile"]["p50_ms"],
        "reference_p95_ms": reference["compile"]["p95_ms"],
        "ratio_p50": reference["compile_p50_ratio"],
        "ratio_p95": reference["compile_p95_ratio"],
        "entity_query_p50_ms": operations["entity_query"]["p50_ms"],
        "entity_query_p95_ms": operations["entity_query"]["p95_ms"],
        "cold_first_compile_ms": cold.get("first_compile_ms"),
        "cold_from_snapshot": cold.get("from_snapshot"),
        "cold_process_wall_ms": cold.get("process_wall_ms"),
        "cold_rebuild_ms": rebuilt.get("first_compile_ms"),
        "index_mb": rebuilt.get("index_mb"),
        "worker_rss_mb": cold.get("rss_after_mb"),
        "index_build_ms": report["index_build_ms"],
    }


def sweep_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["".join(f"{heading:>{width}}" for _, heading, width in COLUMNS)]
    lines.append("-" * sum(width for _, _, width in COLUMNS))
    for row in rows:
        cells = []
        for key, _, width in COLUMNS:
            value = row.get(key)
            if value is None:
                text = "-"
            elif isinstance(value, bool):
                text = "yes" if value else "no"
            else:
                text = f"{value:g}" if isinstance(value, float) else str(value)
            cells.append(f"{text:>{width}}")
        lines.append("".join(cells))
    return lines


def _series(rows: Sequence[dict[str, Any]], key: str, label: str) -> Series:
    points = [(float(r["facts"]), float(r[key])) for r in rows if r.get(key)]
    return Series(label, points)


def sweep_plot(rows: Sequence[dict[str, Any]], path: Path, *, title: str) -> Path:
    """Writes the log-log chart of ``rows`` to ``path`` (SVG); answers the path."""
    panels = [
        Panel(heading, "facts", unit, [_series(rows, key, label) for key, label in lines])
        for heading, unit, lines in PANELS
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(loglog_svg(panels, title=title), encoding="utf-8")
    return path


def sweep_run(
    sizes: Sequence[int],
    *,
    seed: int,
    plot: Path,
    keep: bool = False,
    cold_start: bool = True,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Benchmarks each size in increasing order; answers the rows, the full reports and where
    the chart went."""
    reports: list[dict[str, Any]] = []
    failed: dict[str, Any] | None = None
    for size in tqdm(sorted(set(sizes)), desc="sizes", disable=None if show_progress else True):
        try:
            reports.append(
                run_benchmark(
                    size, seed=seed, keep=keep, cold_start=cold_start, show_progress=show_progress
                )
            )
        except Exception as error:
            # The largest size that fits this machine is the sweep's last row; larger ones
            # are not tried.
            failed = {"facts": size, "error": f"{type(error).__name__}: {error}"}
            break
    rows = [sweep_row(report) for report in reports]
    title = f"memory_benchmark --scales {','.join(r['scale'] for r in rows)} --seed {seed}"
    written = sweep_plot(rows, plot, title=title)
    return {"seed": seed, "sweep": rows, "failed": failed, "plot": str(written), "runs": reports}
