"""Migration from CognOS: its session-memory database's ``traces`` table becomes our traces.

CognOS (``cognos-gateway``, ``src/trace_store.py``) keeps one SQLite table ``traces``:
``trace_id`` (TEXT, a UUID4), ``created_at`` (ISO-8601 text), ``decision`` (PASS / REFINE /
ESCALATE), ``policy`` (what produced it; the gateway writes the request path), ``trust_score``
and ``risk`` (REAL, may be NULL), ``is_stream`` (0/1), ``status_code``, ``model`` (the gateway
writes the caller's User-Agent), ``request_fingerprint``, ``response_fingerprint``,
``envelope`` and ``metadata`` (JSON text).

Each row goes through ``sessions_app.trace_writes.trace_record``, so it is validated and scored
exactly as a trace sent over REST: same id, time, model, policy, decision, scores and status;
``metadata`` is kept (its context fields — active_project, last_decision, ... — feed the
score), and what has no column here (``is_stream``, the fingerprints, the envelope, a policy or
model longer than our columns) is kept under ``metadata["cognos"]``. A row without a score is
scored by our trust model (and its decision derived from the risk). A row that cannot be
imported (no UUID, no readable time, a value out of range, already imported) is skipped with
its reason.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from sessions_app.contracts import TraceInput
from sessions_app.trace_writes import trace_record

REQUIRED_COLUMNS = frozenset({"trace_id", "created_at"})
DECISIONS = frozenset({"PASS", "REFINE", "ESCALATE"})
JSON_COLUMNS = ("request_fingerprint", "response_fingerprint", "envelope")


@dataclass
class CognosImport:
    project: str
    imported: int = 0
    scored: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "imported": self.imported,
            "scored": self.scored,
            "skipped": len(self.skipped),
            "skipped_rows": self.skipped,
        }


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ApplicationError(f"DB: cannot open {path} ({exc})") from None
    db.row_factory = sqlite3.Row
    try:
        columns = {row[1] for row in db.execute("PRAGMA table_info(traces)")}
        if not columns:
            raise ApplicationError(f"DB: {path} has no traces table (not a CognOS database)")
        if not columns >= REQUIRED_COLUMNS:
            missing = ", ".join(sorted(REQUIRED_COLUMNS - columns))
            raise ApplicationError(f"DB: its traces table lacks {missing}")
        for row in db.execute("SELECT * FROM traces ORDER BY created_at, trace_id"):
            yield dict(row)
    except sqlite3.DatabaseError as exc:
        raise ApplicationError(f"DB: cannot read {path} ({exc})") from None
    finally:
        db.close()


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _created_at(text: Any) -> str:
    """CognOS writes ``datetime.isoformat()``; a time without a zone is taken as UTC."""
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


def trace_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A CognOS row as the fields of our trace (what we have no column for goes to
    ``metadata["cognos"]``). Raises ValueError naming the field it cannot read."""
    metadata = _json(row.get("metadata"))
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    kept = {name: _json(row[name]) for name in JSON_COLUMNS if row.get(name) is not None}
    if row.get("is_stream") is not None:
        kept["is_stream"] = bool(row["is_stream"])
    fields: dict[str, Any] = {"trace_id": row["trace_id"]}
    try:
        fields["created_at"] = _created_at(row["created_at"])
    except ValueError:
        raise ValueError(f"created_at: not an ISO-8601 time ({row['created_at']!r})") from None
    for name, limit in (("model", 200), ("policy", 64)):
        value = row.get(name)
        if value:
            fields[name] = str(value)[:limit]
            if len(str(value)) > limit:
                kept[name] = value
    decision = str(row.get("decision") or "").upper()
    if decision in DECISIONS:
        fields["decision"] = decision
    elif decision:
        kept["decision"] = row["decision"]
    for name in ("trust_score", "risk", "status_code"):
        if row.get(name) is not None:
            fields[name] = row[name]
    if kept:
        metadata["cognos"] = kept
    fields["metadata"] = metadata
    return fields


def cognos_traces_import(*, path: Path, project: Project) -> CognosImport:
    """Imports every row of the CognOS ``traces`` table it can; names the others."""
    result = CognosImport(project=project.slug)
    for row in _rows(path):
        trace_id = str(row.get("trace_id"))
        try:
            fields = trace_fields(row)
            params = TraceInput.parse(fields)
            trace_record(project=project, params=params)
        except (ValueError, ApplicationError) as exc:
            reason = exc.message if isinstance(exc, ApplicationError) else str(exc)
            result.skipped.append({"trace_id": trace_id, "reason": reason})
            continue
        result.imported += 1
        if row.get("trust_score") is None and row.get("risk") is None:
            result.scored += 1
    return result
