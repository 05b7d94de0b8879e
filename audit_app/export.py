"""Export of the injection log from the console (django-import-export, export only).

Each row carries the record's whole hashed payload (so ``audit_app.domain.chain.record_hash``
recomputes its ``record_hash`` from the row alone, and ``prev_hash`` links it to the row
before) and, on every row, the log's head at export time and the latest signed checkpoint:
whoever receives the file can check that the rows chain up to a head the operator signed.

CSV cells that begin with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return are prefixed
with ``'`` so a spreadsheet shows them as text instead of running them as formulas: strip one
leading ``'`` from such a cell to get the value back (hashes, JSON and numbers never begin with
one of these). JSON is exported exactly as stored. The library's own setting
(``IMPORT_EXPORT_ESCAPE_FORMULAE_ON_EXPORT``) is not used: it only removes a leading ``=``.
"""

from __future__ import annotations

from typing import Any

import tablib
from import_export import fields, resources
from import_export.formats import base_formats

from audit_app.domain.chain import HASHED_FIELDS_V1
from audit_app.models import AuditCheckpoint, InjectionLogHead, InjectionRecord
from memoryproject.domain.canonical import canonical_json
from memoryproject.timeutil import iso

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: The chain columns repeated on every row (the same values: the export's own provenance).
CHAIN_COLUMNS = (
    "log_head_seq",
    "log_head_hash",
    "checkpoint_id",
    "checkpoint_created_at",
    "checkpoint_seq",
    "checkpoint_head",
    "checkpoint_hmac",
    "checkpoint_body",
)


def escape_formula(cell: Any) -> Any:
    """A CSV cell a spreadsheet will not evaluate."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


class FormulaSafeCSV(base_formats.CSV):
    def export_data(self, dataset: tablib.Dataset, **kwargs: Any) -> Any:
        safe = tablib.Dataset(headers=dataset.headers)
        for row in dataset:
            safe.append([escape_formula(cell) for cell in row])
        return super().export_data(safe, **kwargs)


def _json(value: Any) -> str:
    """The canonical JSON its MAC covers (a checkpoint's body)."""
    return canonical_json(value).decode("utf-8")


def chain_provenance() -> dict[str, Any]:
    """The log's head and the latest stored checkpoint, read once per export."""
    head = InjectionLogHead.objects.filter(pk=1).first()
    checkpoint = AuditCheckpoint.objects.order_by("-id").first()
    return {
        "log_head_seq": head.seq if head else 0,
        "log_head_hash": head.last_hash if head else "",
        "checkpoint_id": checkpoint.pk if checkpoint else "",
        "checkpoint_created_at": iso(checkpoint.created_at) if checkpoint else "",
        "checkpoint_seq": checkpoint.log_seq if checkpoint else "",
        "checkpoint_head": checkpoint.log_head if checkpoint else "",
        "checkpoint_hmac": checkpoint.mac if checkpoint else "",
        "checkpoint_body": _json(checkpoint.body) if checkpoint else "",
    }


# The columns: the payload record format 1 hashes, in its order, each name followed by the columns
# that belong beside it (the format, the project's slug, the self-reported client, what format 2
# hashes too, the record's own hash).
_BESIDE = {
    "seq": ("record_format",),
    "project_id": ("project",),
    "client": ("client_reported",),
    "trace_ids": ("request", "items"),
    "prev_hash": ("record_hash",),
}
COLUMNS = ("id", *(c for name in HASHED_FIELDS_V1 for c in (name, *_BESIDE.get(name, ()))))


class InjectionRecordResource(resources.ModelResource):
    """One row per record: the hashed payload, the project's slug, and the chain columns."""

    # Not named "format": the export form's own "format" field would shadow it.
    record_format = fields.Field(attribute="format", column_name="format")
    project_id = fields.Field(attribute="project_id", column_name="project_id")
    project = fields.Field(column_name="project")
    generated_at = fields.Field(column_name="generated_at")
    created_at = fields.Field(column_name="created_at")
    trace_ids = fields.Field(column_name="trace_ids")
    request = fields.Field(column_name="request")
    items = fields.Field(column_name="items")

    class Meta:
        model = InjectionRecord
        fields = COLUMNS
        export_order = fields

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name in CHAIN_COLUMNS:
            self.fields[name] = fields.Field(column_name=name, attribute=None, readonly=True)
        self._chain: dict[str, Any] = {}

    def get_export_fields(self, selected_fields: Any = None) -> list[Any]:
        chosen = list(super().get_export_fields(selected_fields))
        names = {f.column_name for f in chosen}
        # The chain columns always go out: they are what makes the file verifiable.
        return chosen + [self.fields[c] for c in CHAIN_COLUMNS if c not in names]

    def before_export(self, queryset: Any, **kwargs: Any) -> None:
        self._chain = chain_provenance()

    def export_field(self, field: Any, instance: Any, **kwargs: Any) -> Any:
        if field.column_name in CHAIN_COLUMNS:
            if not self._chain:
                self._chain = chain_provenance()
            return self._chain[field.column_name]
        return super().export_field(field, instance, **kwargs)

    def dehydrate_project(self, record: InjectionRecord) -> str:
        return record.project.slug if record.project is not None else ""

    def dehydrate_generated_at(self, record: InjectionRecord) -> str:
        return iso(record.generated_at) or ""

    def dehydrate_created_at(self, record: InjectionRecord) -> str:
        return iso(record.created_at) or ""

    def dehydrate_trace_ids(self, record: InjectionRecord) -> str:
        return _json(record.trace_ids)

    def dehydrate_request(self, record: InjectionRecord) -> str:
        return _json(record.request)

    def dehydrate_items(self, record: InjectionRecord) -> str:
        return _json(record.items)
