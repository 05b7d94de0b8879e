"""REST doors of the audit trail."""

from __future__ import annotations

from audit_app import operations
from memoryproject.drf import OperationView


class ContradictionAuditView(OperationView):
    """Runs the contradiction auditor over the project's facts (see audit_contradictions)."""

    operation = operations.CONTRADICTIONS_AUDIT
