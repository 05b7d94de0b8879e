"""The knowledge-graph operations every door serves (see memoryproject.operations)."""

from __future__ import annotations

from memoryproject.operations import Operation  # noqa: F401

# --- graph (facts, episodes, entities, time travel, integrity) ---------------------------------

# --- context compiler ---------------------------------------------------------------------------
