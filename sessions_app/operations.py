"""The session-memory operations every door serves (see memoryproject.operations)."""

from __future__ import annotations

from memoryproject.operations import Operation
from sessions_app.contracts import (
    LoadInput,
    LoadResult,
    PlanInput,
    PlanResult,
    SaveInput,
    SaveResult,
    TraceInput,
    TraceOut,
)
from sessions_app.plan import plan_context
from sessions_app.session_memory import session_load, session_save
from sessions_app.trace_writes import trace_record

TRACE_RECORD = Operation(
    "trace_record", TraceInput, TraceOut, "write", trace_record, lambda _: True
)
# A plan only reads memory (plus its receipt): a read-scoped key may ask for one.
PLAN_CONTEXT = Operation("plan_context", PlanInput, PlanResult, "read", plan_context)
SESSION_SAVE = Operation(
    "save_session", SaveInput, SaveResult, "write", session_save, lambda _: True
)
SESSION_LOAD = Operation("load_session", LoadInput, LoadResult, "read", session_load)
