"""The knowledge-graph operations every door serves (see memoryproject.operations)."""

from __future__ import annotations

from graph_app.compiler import context_deliver
from graph_app.contracts import graph as g
from graph_app.contracts.compile import CompileInput, CompileResult
from graph_app.contracts.entities import EntityUpsertResult
from graph_app.selectors import entity_query, episode_get, fact_get, graph_as_of, integrity_verify
from graph_app.services import entity_upsert, episode_record, fact_retract, fact_upsert
from memoryproject.operations import Operation

# --- graph (facts, episodes, entities, time travel, integrity) ---------------------------------


def _created(result: g.FactUpsertResult | g.EpisodeRecordResult) -> bool:
    # 201 for a new record; an identical re-assertion or re-recording answers 200.
    return result.created


FACT_UPSERT = Operation(
    "memory_upsert_fact", g.FactUpsertInput, g.FactUpsertResult, "write", fact_upsert, _created
)
FACT_GET = Operation("memory_get_fact", g.FactGetInput, g.FactOut, "read", fact_get)
FACT_RETRACT = Operation(
    "memory_retract_fact", g.FactRetractInput, g.FactRetractResult, "write", fact_retract
)
EPISODE_RECORD = Operation(
    "memory_record_episode",
    g.EpisodeRecordInput,
    g.EpisodeRecordResult,
    "write",
    episode_record,
    _created,
)
EPISODE_GET = Operation("memory_get_episode", g.EpisodeGetInput, g.EpisodeOut, "read", episode_get)
ENTITY_UPSERT = Operation(
    "entity_upsert", g.EntityUpsertInput, EntityUpsertResult, "write", entity_upsert
)
ENTITY_QUERY = Operation(
    "memory_query_entity", g.EntityQueryInput, g.EntityQueryResult, "read", entity_query
)
TIME_TRAVEL = Operation(
    "memory_time_travel", g.TimeTravelInput, g.TimeTravelResult, "read", graph_as_of
)
INTEGRITY_VERIFY = Operation(
    "memory_verify_integrity", g.IntegrityInput, g.IntegrityResult, "read", integrity_verify
)

# --- context compiler ---------------------------------------------------------------------------
# Only reads memory: a read-scoped key may compile (a POST only because the query can be long).
CONTEXT_COMPILE = Operation(
    "memory_compile_context", CompileInput, CompileResult, "read", context_deliver
)
