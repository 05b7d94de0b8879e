"""The audit operations every door serves (see memoryproject.operations)."""

from __future__ import annotations

from audit_app import receipt_selectors
from audit_app.contracts import (
    AuditVerification,
    AuditVerifyInput,
    ContradictionAuditInput,
    ContradictionAuditResult,
)
from audit_app.findings import contradictions_audit
from memoryproject.operations import AcrossProjects, Operation

# Auto-resolve retires facts, so the audit needs write access.
CONTRADICTIONS_AUDIT = Operation(
    "memory_audit_contradictions",
    ContradictionAuditInput,
    ContradictionAuditResult,
    "write",
    contradictions_audit,
)

# Auditors' read (an admin key) over every project the key may read; what it shows of the
# whole log depends on the auditor role (receipt_selectors.auditor_is).
AUDIT_VERIFY = Operation(
    "memory_verify_audit",
    AuditVerifyInput,
    AuditVerification,
    "read",
    AcrossProjects[AuditVerifyInput, AuditVerification](receipt_selectors.audit_verify),
    scope="admin",
)
