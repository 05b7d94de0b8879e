"""Compiled memory delivered to a caller: the bundle answered only once its receipt (what was
asked, every source delivered with its content hash, the hash of the text delivered) is
committed to the injection log.
"""

from __future__ import annotations

from graph_app.compiler import context_compile
from graph_app.contracts.compile import CompileInput, CompileResult
from graph_app.quarantine_holds import deliveries_held
from memoryproject.compliance import compliance
from memoryproject.contracts import Caller, takes
from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from memoryproject.writes import write_transaction


def delivery_receipt(
    *,
    project: Project,
    caller: Caller,
    params: CompileInput,
    result: CompileResult,
    text: str,
    source: str = "compile",
) -> int:
    """Appends the receipt of compiled memory delivered to a caller: what was asked, every
    source delivered with its content hash, and the SHA-256 of ``text``, the exact text
    delivered (the bundle, or the prompt built around it). Answers the receipt's id. Call in
    the transaction that answers."""
    record = compliance().receipt_append(
        project=project,
        **caller.receipt_fields(),
        status="injected",
        decision="",
        trust_score=1.0,
        threshold=0.0,
        mode=source,
        trace_ids=[],
        system_prompt=text,
        generated_at=utcnow(),
        source=source,
        request=params.model_dump(mode="json"),
        items=[{"kind": i.kind, "id": i.id, "sha256": i.sha256} for i in result.items],
    )
    return int(record.pk)


@takes(CompileInput)
def context_deliver(*, project: Project, params: CompileInput, caller: Caller) -> CompileResult:
    """``context_compile`` for a caller (REST, MCP): the bundle, answered only once its
    receipt is committed to the injection log; the answer names the receipt
    (``injection_id``). The compile reads outside the write turn: on SQLite a transaction
    around it would hold the database's one write lock for the whole compile (about a second
    with proofs at 100k facts), and every writer would wait."""
    result = context_compile(project=project, params=params)
    with write_transaction():
        deliveries_held(project=project, held=result.quarantined)
        receipt = delivery_receipt(
            project=project, caller=caller, params=params, result=result, text=result.markdown
        )
    return result.model_copy(update={"injection_id": receipt})
