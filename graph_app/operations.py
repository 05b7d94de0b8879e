"""The knowledge-graph operations every door serves (see memoryproject.operations)."""

from __future__ import annotations

from graph_app.contracts.compile import CompileInput, CompileResult
from graph_app.contracts.entities import (
    EntityQueryInput,
    EntityQueryResult,
    EntityUpsertInput,
    EntityUpsertResult,
)
from graph_app.contracts.episodes import (
    EpisodeGetInput,
    EpisodeOut,
    EpisodeRecordInput,
    EpisodeRecordResult,
)
from graph_app.contracts.facts import (
    FactGetInput,
    FactOut,
    FactRetractInput,
    FactRetractResult,
    FactUpsertInput,
    FactUpsertResult,
)
from graph_app.contracts.integrity import IntegrityInput, IntegrityResult
from graph_app.contracts.time_travel import TimeTravelInput, TimeTravelResult
from graph_app.delivery import context_deliver
from graph_app.entity_reads import entity_query
from graph_app.entity_writes import entity_upsert
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_retract, fact_upsert
from graph_app.integrity import integrity_verify
from graph_app.record_views import episode_get, fact_get
from graph_app.time_travel import graph_as_of
from memoryproject.operations import Operation

# --- graph (facts, episodes, entities, time travel, integrity) ---------------------------------


def _created(result: FactUpsertResult | EpisodeRecordResult) -> bool:
    # 201 for a new record; an identical re-assertion or re-recording answers 200.
    return result.created


FACT_UPSERT = Operation(
    "memory_upsert_fact", FactUpsertInput, FactUpsertResult, "write", fact_upsert, _created
)
FACT_GET = Operation("memory_get_fact", FactGetInput, FactOut, "read", fact_get)
FACT_RETRACT = Operation(
    "memory_retract_fact", FactRetractInput, FactRetractResult, "write", fact_retract
)
EPISODE_RECORD = Operation(
    "memory_record_episode",
    EpisodeRecordInput,
    EpisodeRecordResult,
    "write",
    episode_record,
    _created,
)
EPISODE_GET = Operation("memory_get_episode", EpisodeGetInput, EpisodeOut, "read", episode_get)
ENTITY_UPSERT = Operation(
    "entity_upsert", EntityUpsertInput, EntityUpsertResult, "write", entity_upsert
)
ENTITY_QUERY = Operation(
    "memory_query_entity", EntityQueryInput, EntityQueryResult, "read", entity_query
)
TIME_TRAVEL = Operation(
    "memory_time_travel", TimeTravelInput, TimeTravelResult, "read", graph_as_of
)
INTEGRITY_VERIFY = Operation(
    "memory_verify_integrity", IntegrityInput, IntegrityResult, "read", integrity_verify
)

# --- context compiler ---------------------------------------------------------------------------
# Only reads memory: a read-scoped key may compile (a POST only because the query can be long).
CONTEXT_COMPILE = Operation(
    "memory_compile_context", CompileInput, CompileResult, "read", context_deliver
)
