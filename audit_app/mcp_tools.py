"""The audit trail over MCP: memory_audit_contradictions and memory_verify_audit."""

from __future__ import annotations

from audit_app.contracts import AuditVerification, ContradictionAuditResult
from audit_app.operations import AUDIT_VERIFY, CONTRADICTIONS_AUDIT
from memoryproject.mcp_calls import IDEMPOTENT_WRITE, READ, McpRegistry, ToolSpec, add_tools

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


VERIFY_DESCRIPTION = """\
Verify the audit trail of your projects: the injection log (the hash-chained receipt of every
context delivered to an agent) and each project's knowledge graph, both held to their heads and
to the latest signed checkpoint. Use it before trusting memory for a decision that must be
auditable, or after an incident. Needs an API key with scope admin; reads only, writes nothing.
The whole log is verified, every project's records included, so a break anywhere answers
`verified: false`; but you see only your projects: how many of their records were checked,
their newest record (seq, hash), each graph's result, and where the log breaks only when the
first break is one of their records. Global figures (the log's head, all records checked, its
anchor, stored checkpoints, warnings, other projects) come only to the auditor role, an admin
key bound to every project, under `auditor`. `project` narrows the answer to one of your
projects. Limits: the whole log and each graph are read in full, so the call grows with them;
records appended after the latest checkpoint by someone who also moved the head read as
genuine until the next checkpoint."""


def render_verify(data: AuditVerification) -> str:
    state = "verified" if data.verified else "NOT verified"
    lines = [f"Audit verification of {', '.join(data.projects) or 'no project'}: {state}."]
    lines.append(f"Injection log: {data.log.statement}")
    if data.log.latest is not None:
        lines.append(f"  newest record of these projects: seq {data.log.latest.seq}")
    for slug, graph in data.graph.items():
        verdict = "verified" if graph.verified else "NOT verified"
        lines.append(f"Graph {slug}: {verdict} ({graph.records} records, head {graph.chain.head})")
    if data.auditor is not None:
        chain = data.auditor.log
        head = f"seq {chain.head.seq}" if chain.head is not None else "none"
        lines.append(
            f"Auditor: {chain.checked} records checked in all, head {head}, "
            f"{len(chain.checkpoints)} checkpoint(s) held, {len(chain.warnings)} warning(s)."
        )
    return "\n".join(lines)


TOOLS: tuple[ToolSpec, ...] = (
    (AUDIT_VERIFY, "Verify the audit trail", VERIFY_DESCRIPTION, READ, render_verify),
    (
        CONTRADICTIONS_AUDIT,
        "Audit contradictions",
        AUDIT_DESCRIPTION,
        IDEMPOTENT_WRITE,
        render_audit,
    ),
)


def register(server: McpRegistry) -> None:
    add_tools(server, TOOLS)
