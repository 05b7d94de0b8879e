"""Export and import of one project, lossless: every row keeps its id, both time axes, its
hashes and its links, so the graph's integrity check and the injection log's verification pass
in the database it lands in.

The file is JSON Lines. The first line is the header: ``format``/``version``, ``exported_at``,
the project, ``counts`` per table and ``body_sha256``, the SHA-256 of every following line
(each with its newline), so a truncated or edited file is refused before anything is written.
Each body line is ``{"table": name, "row": {column: value}}`` with the model's own columns
(timestamps ISO-8601 UTC with microseconds), in the order an import inserts them.

Why the rules on import (``import_memory`` and the README say them to the user):

- The target must not hold the project already (a project row without any data, such as the
  ``default`` a fresh database creates, is reused).
- Graph hashes and the graph change log cover the project's slug: renaming (``--project``) a
  project whose graph has been sealed would leave every hash false, and re-sealing would forge
  a history that never happened. So a rename is refused when the export holds graph changes;
  traces, summaries and receipts (which hash the project's numeric id, not its slug) rename.
- The injection log is one chain across projects, and each record hashes its project's
  numeric id. Receipts are appended with their own seq, prev_hash and record_hash only when the
  target log is empty, the export's receipts are the whole chain from genesis (no other
  project's records between them) and the project keeps its numeric id; otherwise the import
  refuses, naming why, and ``--skip-receipts`` imports everything else.
- The file is not trusted (``export_file`` reads it): its size is capped before it is parsed,
  every row is held to the API's rules for its kind, and every reference must resolve to a row
  of the same file (``import_references``), never to another project's. Hashes are recomputed
  by the verification, never taken from the file.
- Every row is screened as the API screens a write (``import_screening``): a row holding a
  secret refuses the import (it keeps its hashes, so it cannot be masked), instruction-like
  passages are kept and listed as warnings.
- The whole import is one transaction, verified before it commits: a refused or failed import
  writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.color import no_style
from django.db import connection, models
from tqdm import tqdm

from audit_app.models import DeliveredText, ErasedText, InjectionLogHead, InjectionRecord
from audit_app.receipt_sources import receipt_sources_add
from audit_app.selectors import injection_log_verify
from graph_app.integrity import integrity_verify
from graph_app.models import (
    Entity,
    Episode,
    EpisodeFile,
    GraphChange,
    GraphRevision,
    TemporalFact,
)
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.models import Project
from memoryproject.reads import read_snapshot
from memoryproject.timeutil import to_utc, utcnow
from memoryproject.writes import write_transaction
from orchestration.export_file import (
    FORMAT,
    TABLES,
    VERSION,
    ImportFile,
    PortabilityError,
    import_file_read,
)
from orchestration.import_references import import_references_check
from orchestration.import_screening import import_screen
from sessions_app.models import SessionSummary, Trace

#: Progress bars appear from this many rows on (small projects stay quiet).
PROGRESS_FROM = 2_000

EpisodeEntity = Episode.entities.through


@dataclass
class ImportResult:
    project: str
    counts: dict[str, int]
    receipts: str  # "imported" | "skipped" | "none"
    integrity_ok: bool
    log_ok: bool
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.integrity_ok and self.log_ok,
            "project": self.project,
            "counts": self.counts,
            "receipts": self.receipts,
            "verification": {"graph_integrity": self.integrity_ok, "injection_log": self.log_ok},
            "warnings": self.warnings,
        }


# --- rows --------------------------------------------------------------------------------------


def _columns(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return [f for f in model._meta.concrete_fields]


def _dump_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if hasattr(value, "hex") and type(value).__name__ == "UUID":
        return str(value)
    return value


def _row(obj: models.Model) -> dict[str, Any]:
    return {f.attname: _dump_value(getattr(obj, f.attname)) for f in _columns(type(obj))}


def _instance(model: type[models.Model], row: dict[str, Any], project_id: int) -> models.Model:
    values = {}
    for f in _columns(model):
        value = row.get(f.attname)
        if f.attname == "project_id":
            value = project_id
        elif value is not None and not isinstance(f, models.JSONField):
            value = f.to_python(value)
        values[f.attname] = value
    return model(**values)


def _progress(items: Iterable[Any], total: int, label: str) -> Iterable[Any]:
    return tqdm(
        items, total=total, desc=label, unit="row", file=sys.stderr, disable=total < PROGRESS_FROM
    )


# --- export ------------------------------------------------------------------------------------


def _querysets(project: Project) -> Iterator[tuple[str, models.QuerySet[Any]]]:
    receipts = InjectionRecord.objects.filter(project=project).order_by("seq")
    texts = list(receipts.values_list("prompt_sha256", flat=True))
    yield "entity", Entity.objects.filter(project=project).order_by("id")
    yield "episode", Episode.objects.filter(project=project).order_by("id")
    yield "episode_entity", EpisodeEntity.objects.filter(episode__project=project).order_by("id")
    yield "episode_file", EpisodeFile.objects.filter(episode__project=project).order_by("id")
    yield "fact", TemporalFact.objects.filter(project=project).order_by("id")
    yield "graph_change", GraphChange.objects.filter(project=project).order_by("seq")
    yield "trace", Trace.objects.filter(project=project).order_by("id")
    yield "session_summary", SessionSummary.objects.filter(project=project).order_by("id")
    yield "delivered_text", DeliveredText.objects.filter(sha256__in=texts).order_by("sha256")
    yield "erased_text", ErasedText.objects.filter(sha256__in=texts).order_by("sha256")
    yield "receipt", receipts


def project_export(*, slug: str, out: Path) -> dict[str, Any]:
    """Writes the project to ``out`` (JSON Lines, header first) and answers the header."""
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise PortabilityError(f"--project: no project '{slug}'", field="project")
    body: list[str] = []
    counts: dict[str, int] = {}
    with read_snapshot():  # one consistent state, writers not held up
        for table, queryset in _querysets(project):
            total = queryset.count()
            counts[table] = total
            for obj in _progress(queryset.iterator(chunk_size=2_000), total, f"export {table}"):
                body.append(json.dumps({"table": table, "row": _row(obj)}, sort_keys=True) + "\n")
        revision = GraphRevision.objects.filter(project=project).first()
    digest = hashlib.sha256("".join(body).encode()).hexdigest()
    header = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _dump_value(utcnow()),
        "project": _row(project),
        "graph_revision": _row(revision) if revision else None,
        "counts": counts,
        "body_sha256": digest,
    }
    with out.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(header, sort_keys=True) + "\n")
        handle.writelines(body)
    return header


# --- import ------------------------------------------------------------------------------------


def _project_target(header: dict[str, Any], slug: str) -> Project:
    """The project rows land in: a new one (keeping the exported id when it is free), or an
    existing one that holds nothing."""
    exported = header["project"]
    project = Project.objects.filter(slug=slug).first()
    if project is not None:
        held = [
            name
            for name, model in TABLES.items()
            if hasattr(model, "project") and model._default_manager.filter(project=project).exists()
        ]
        if held or GraphChange.objects.filter(project_id=project.pk).exists():
            raise PortabilityError(
                f"--project: project '{slug}' already holds data ({', '.join(held) or 'graph'}); "
                "import into an empty database or name a new project",
                field="project",
            )
    else:
        pk = exported["id"] if not Project.objects.filter(pk=exported["id"]).exists() else None
        project = Project.objects.create(pk=pk, slug=slug)
    created = to_utc(exported["created_at"])
    Project.objects.filter(pk=project.pk).update(name=exported.get("name", ""), created_at=created)
    project.refresh_from_db()
    return project


def _receipts_refusal(
    header: dict[str, Any], rows: Sequence[dict[str, Any]], project: Project
) -> str | None:
    """Why the export's receipts cannot keep their hashes here (None when they can)."""
    if not rows:
        return None
    if InjectionRecord.objects.exists() or InjectionLogHead.objects.filter(seq__gt=0).exists():
        return "the injection log here is not empty (receipts keep their hashes only in one)"
    if project.pk != header["project"]["id"]:
        return (
            f"the project's id here is {project.pk}, not {header['project']['id']} "
            "(each receipt hashes it)"
        )
    prev = GENESIS_HASH
    for seq, row in enumerate(rows, start=1):
        if row["seq"] != seq or row["prev_hash"] != prev:
            return (
                f"receipt seq {row['seq']} does not follow seq {seq - 1} of this export: the "
                "exported log interleaves other projects' records, so it cannot verify alone"
            )
        prev = row["record_hash"]
    return None


def _insert(model: type[models.Model], rows: list[dict[str, Any]], project: Project) -> None:
    objs = [_instance(model, row, project.pk) for row in rows]
    with tqdm(
        total=len(objs),
        desc=f"import {model.__name__}",
        unit="row",
        file=sys.stderr,
        disable=len(objs) < PROGRESS_FROM,
    ) as bar:
        for start in range(0, len(objs), 1_000):
            model._default_manager.bulk_create(objs[start : start + 1_000])
            bar.update(len(objs[start : start + 1_000]))


def _receipts_append(rows: list[dict[str, Any]], project: Project) -> None:
    """Appends the receipts in seq order, moving the head one record at a time as appends do
    (the head's trigger allows nothing else)."""
    head, _ = InjectionLogHead.objects.select_for_update().get_or_create(
        pk=1, defaults={"seq": 0, "last_hash": GENESIS_HASH}
    )
    for row in _progress(rows, len(rows), "receipts"):
        record = _instance(InjectionRecord, row, project.pk)
        assert isinstance(record, InjectionRecord)
        record.save(force_insert=True)
        receipt_sources_add(record, record.items)
        head.seq, head.last_hash = record.seq, record.record_hash
        head.save(update_fields=["seq", "last_hash"])


def _sequences_reset() -> None:
    """Rows came with their ids: PostgreSQL's sequences must move past them."""
    models_with_ids: list[type[models.Model]] = [Project, Entity, EpisodeEntity, EpisodeFile]
    models_with_ids += [GraphChange, Trace, SessionSummary, InjectionRecord]
    statements = connection.ops.sequence_reset_sql(no_style(), models_with_ids)
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def project_import(
    *, path: Path, project_slug: str | None = None, skip_receipts: bool = False
) -> ImportResult:
    """Imports an export into this database (one transaction, verified before it commits)."""
    file = import_file_read(path)
    header = file.header
    slug = project_slug or header["project"]["slug"]
    by_table = {name: [row.values for row in rows] for name, rows in file.rows.items()}
    if slug != header["project"]["slug"] and by_table["graph_change"]:
        raise PortabilityError(
            f"--project: the graph of '{header['project']['slug']}' is sealed (its hashes and "
            "change log cover the project's slug); it can only be imported under its own name",
            field="project",
        )
    with write_transaction():
        return _import_rows(file, by_table, slug, skip_receipts)


def _import_rows(
    file: ImportFile, by_table: dict[str, list[dict[str, Any]]], slug: str, skip: bool
) -> ImportResult:
    header = file.header
    project = _project_target(header, slug)
    receipts = by_table.pop("receipt")
    refusal = None if skip else _receipts_refusal(header, receipts, project)
    if refusal is not None:
        raise PortabilityError(
            f"receipts: {refusal}; import into an empty database or pass --skip-receipts"
        )
    import_references_check(file, receipts=not skip)
    flagged = import_screen(file, receipts=not skip)
    if skip:
        texts = {"delivered_text", "erased_text"}
        by_table = {k: ([] if k in texts else v) for k, v in by_table.items()}
    for name, rows in by_table.items():
        if name in ("delivered_text", "erased_text"):
            rows = [
                r for r in rows if not TABLES[name]._default_manager.filter(pk=r["sha256"]).exists()
            ]
        _insert(TABLES[name], rows, project)
    revision = header.get("graph_revision")
    if revision:
        GraphRevision.objects.update_or_create(
            project=project,
            defaults={k: revision[k] for k in ("revision", "changes", "head_hash")},
        )
    if not skip:
        _receipts_append(receipts, project)
    _sequences_reset()
    counts = {name: len(rows) for name, rows in by_table.items()}
    counts["receipt"] = 0 if skip else len(receipts)
    result = _verified(
        project, counts, "skipped" if skip and receipts else "imported" if receipts else "none"
    )
    result.warnings += flagged
    return result


def _verified(project: Project, counts: dict[str, int], receipts: str) -> ImportResult:
    integrity = integrity_verify(project=project)
    log = injection_log_verify()
    result = ImportResult(
        project=project.slug,
        counts=counts,
        receipts=receipts,
        integrity_ok=bool(integrity.verified),
        log_ok=bool(log.ok),
        warnings=list(log.warnings),
    )
    if not (result.integrity_ok and result.log_ok):
        raise PortabilityError(
            "verification failed after import (nothing was written): graph integrity "
            f"{'ok' if result.integrity_ok else 'FAILED'}, injection log "
            f"{'ok' if result.log_ok else 'FAILED'}"
        )
    return result
