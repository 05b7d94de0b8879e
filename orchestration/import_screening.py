"""Every row of an import is screened as the API screens a write (``field_screening``).

The same fields, the same function: an entity's kind, name and aliases, an episode's title,
content, files_touched and metadata (keys and values), a file row's path, a fact's object
value, a trace's model, policy and metadata, a summary's text and a receipt's request are
screened as free text; an entity's id, a fact's predicate and an episode's entities_mentioned
and external_id as identifiers.

A write over the API stores a secret masked. An imported row cannot be: it keeps its hashes
(the graph's change log and the receipts seal its content), and masking it here would either
break them or forge a history that never happened. So a row holding a secret, in any screened
field, identifier or not, refuses the whole import, naming the file's line, the column and the
kind of secret (never the secret): erase the record where the export came from (``manage.py
erase``) and export again, or leave the receipts out (``--skip-receipts``) when one of them
holds it. Instruction-like passages are kept, as the API keeps them, and listed as warnings.

Called inside the import's transaction, before anything of it is inserted.
"""

from __future__ import annotations

from typing import Any

from memoryproject.domain.field_screening import write_screen, writes_clean
from orchestration.export_file import ImportFile, PortabilityError

#: Table -> (free columns, identifier columns) screened, as their API write screens them.
SCREENED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "entity": (("kind", "name", "aliases"), ("slug",)),
    "episode": (
        ("title", "content", "files_touched", "metadata"),
        ("entities_mentioned", "external_id"),
    ),
    "episode_file": (("path",), ()),
    "fact": (("object_value",), ("predicate",)),
    "trace": (("model", "policy", "metadata"), ()),
    "session_summary": (("summary",), ()),
    "receipt": (("request",), ()),
}
#: Flagged passages listed as warnings, at most (then how many more).
WARNINGS_MAX = 50
#: Rows probed together (``writes_clean``) before any is screened alone.
_BATCH = 100


def _given(value: Any) -> bool:
    return value not in (None, "", [], {})


def _row_fields(table: str, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    free, ids = SCREENED[table]
    fields = {column: values[column] for column in free if _given(values.get(column))}
    return fields, {column: values.get(column) for column in ids}


def _row_screen(table: str, values: dict[str, Any], line: int) -> list[str]:
    """The row's flagged passages as warnings; a PortabilityError when it holds a secret."""
    screened = write_screen(*_row_fields(table, values))
    secrets = [(r.field, r.kind) for r in screened.refused]
    secrets += [(m.field, m.kind) for m in screened.screening.masked]
    if secrets:
        field, kind = secrets[0]
        remedy = (
            "import with --skip-receipts"
            if table == "receipt"
            else "erase the record where it was exported from (manage.py erase) and export again"
        )
        raise PortabilityError(
            f"FILE line {line}: {table}.{field}: must not hold a secret ({kind}); a secret is "
            f"never stored, and an imported row keeps its hashes, so it cannot be masked: "
            f"{remedy}",
            field=field,
        )
    return [
        f"FILE line {line}: {table}.{flag.field}: instruction-like passage kept and flagged "
        f"({flag.kind}: {flag.rule})"
        for flag in screened.screening.flagged
    ]


def import_screen(file: ImportFile, *, receipts: bool) -> list[str]:
    """Screens every row the import will insert (receipts only when ``receipts``): refuses
    the first, by line, that holds a secret; answers the flagged passages as warnings. Rows
    are probed a batch at a time, and screened one by one only in a batch where something
    was found."""
    rows = sorted(
        (
            (row.line, table, row.values)
            for table in SCREENED
            if receipts or table != "receipt"
            for row in file.rows.get(table, [])
        ),
        key=lambda item: item[0],
    )
    warnings: list[str] = []
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        if writes_clean([_row_fields(table, values) for _, table, values in batch]):
            continue
        for line, table, values in batch:
            warnings += _row_screen(table, values, line)
    if len(warnings) > WARNINGS_MAX:
        more = len(warnings) - WARNINGS_MAX
        warnings = [*warnings[:WARNINGS_MAX], f"... and {more} more flagged passages"]
    return warnings
