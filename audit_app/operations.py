"""The audit operations every door serves (see memoryproject.operations)."""

from __future__ import annotations

from audit_app import services
from audit_app.contracts import ContradictionAuditInput, ContradictionAuditResult
from memoryproject.operations import Operation

# Auto-resolve retires facts, so the audit needs write access.
CONTRADICTIONS_AUDIT = Operation(
    "memory_audit_contradictions",
    ContradictionAuditInput,
    ContradictionAuditResult,
    "write",
    services.contradictions_audit,
)
