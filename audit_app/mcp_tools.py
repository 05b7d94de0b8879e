"""The audit trail over MCP: memory_audit_contradictions."""

from __future__ import annotations

from audit_app import operations
from audit_app.contracts import ContradictionAuditResult
from memoryproject.mcp import IDEMPOTENT_WRITE, MemoryServer, add_tool

AUDIT_DESCRIPTION = """\
Check the project's facts held at `as_of` (default now) for contradictions: a negated
predicate against the plain one for the same object (uses X / does_not_use X), opposite truth
values (is_enabled true / false), antonymous objects (sync / async, allowed / forbidden, ...),
two predicates naming one relation with different objects (uses_token_format / token_format),
and several values of a predicate that is singular in practice. Each finding names the facts,
the rule, the evidence and a suggested resolution. Use before relying on memory for a decision,
or after recording many facts. Effects: stores the run and its findings; with auto_resolve the
older side of each resolvable conflict is retired into history (never deleted). Findings a
person dismissed are not reported again until their facts change."""


def render_audit(data: ContradictionAuditResult) -> str:
    head = (
        f"Contradiction audit of {data.project} at {data['as_of']}: {data.facts_checked} facts, "
        f"{data.open} open finding(s), {data.auto_resolved} auto-resolved."
    )
    lines = [head]
    for f in data.findings:
        lines.append(f"- #{f.id} [{f.state}] {f.rule} on {f.subject}: {f.evidence}")
        lines.append(f"  suggestion: {f.suggestion}")
    return "\n".join(lines)


def register(server: MemoryServer) -> None:
    add_tool(
        server,
        operations.CONTRADICTIONS_AUDIT,
        title="Audit contradictions",
        description=AUDIT_DESCRIPTION,
        annotations=IDEMPOTENT_WRITE,
        render=render_audit,
    )
