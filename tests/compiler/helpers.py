"""What the compiler's tests read of a process's index cache."""

from __future__ import annotations

from typing import Any

from graph_app.index_cache import compiler_cache_stats


def stats_of(project: Any) -> dict[str, int]:
    """How this process holds ``project``'s index (``compiler_cache_stats``): it must be loaded."""
    stats = compiler_cache_stats(project.pk)
    assert stats is not None
    return stats
