"""Every row of an import resolves inside the project it imports.

Rows keep their ids, so a row that names an id the file does not hold would be linked to
whatever has that id here: another project's episode, entity, fact or trace (the graph's link
rows and a fact's subject, successor and source are keys into tables every project shares).
An import into an empty project can only name rows it brings, so each such reference must be
one of the file's own rows; and each row's own key must be free here, or it would collide
with (or, in a table without a constraint, shadow) another project's row. The first reference
outside the file refuses the import, naming the file's line, the column and what it names:
another project's row, or none at all.

Called inside the import's transaction, before anything of it is inserted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import models

from orchestration.export_file import TABLES, ImportFile, PortabilityError, Row

#: Table -> (column, the table it names). A row may name only rows of the same file.
LINKS: dict[str, tuple[tuple[str, str], ...]] = {
    "episode_entity": (("episode_id", "episode"), ("entity_id", "entity")),
    "episode_file": (("episode_id", "episode"),),
    "fact": (
        ("subject_id", "entity"),
        ("object_entity_id", "entity"),
        ("superseded_by_id", "fact"),
        ("source_episode_id", "episode"),
    ),
    "session_summary": (("trace_id", "trace"),),
}
#: Tables whose rows are keyed by content, shared by every project: a row already held is
#: skipped, not refused (its key is the hash of its text, recomputed when it is read).
SHARED = ("delivered_text", "erased_text")
#: SQLite binds at most 999 parameters a statement on old builds.
_CHUNK = 500


def _key(table: str, value: Any) -> Any:
    return TABLES[table]._meta.pk.to_python(value)


def _held(model: type[models.Model], keys: Iterable[Any]) -> set[Any]:
    """The keys among ``keys`` this database already holds in ``model``'s table."""
    keys = list(keys)
    found: set[Any] = set()
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        found.update(model._default_manager.filter(pk__in=chunk).values_list("pk", flat=True))
    return found


def _refusal(row: Row, table: str, column: str, target: str, value: Any, here: bool) -> str:
    where = f"FILE line {row.line}: {table}.{column}"
    if here:
        return (
            f"{where}: names {target} {value!r}, which belongs to another project; every row "
            "of an import must resolve inside the project it imports"
        )
    return f"{where}: names {target} {value!r}, which is not in this file (no such {target})"


def _references(file: ImportFile, receipts: bool) -> list[tuple[Row, str, str, str, Any]]:
    """Every reference to a row the file does not hold: (row, table, column, target, key)."""
    own = {
        t: {_key(t, r.values[TABLES[t]._meta.pk.attname]) for r in rows}
        for t, rows in file.rows.items()
    }
    outside: list[tuple[Row, str, str, str, Any]] = []
    for table, links in LINKS.items():
        for row in file.rows[table]:
            for column, target in links:
                value = row.values.get(column)
                if value is not None and _key(target, value) not in own[target]:
                    outside.append((row, table, column, target, _key(target, value)))
    for row in file.rows["graph_change"]:
        kind, record = row.values["record_type"], row.values["record_id"]
        if kind in ("fact", "episode") and record not in own[kind]:
            outside.append((row, "graph_change", "record_id", kind, record))
    for row in file.rows["receipt"] if receipts else []:
        items = row.values.get("items")
        for item in items if isinstance(items, list) else []:
            kind, ident = (item.get("kind"), item.get("id")) if isinstance(item, dict) else ("", "")
            if kind in ("fact", "episode") and isinstance(ident, str) and ident not in own[kind]:
                outside.append((row, "receipt", "items", kind, ident))
    return outside


def import_references_check(file: ImportFile, *, receipts: bool) -> None:
    """Refuses (PortabilityError) the first row that names a row outside the file, or whose
    own key this database already holds. ``receipts``: whether the receipts are imported."""
    outside = _references(file, receipts)
    here: dict[str, set[Any]] = {}
    for target in {ref[3] for ref in outside}:
        here[target] = _held(TABLES[target], {ref[4] for ref in outside if ref[3] == target})
    refusals: list[tuple[int, str]] = []
    for row, table, column, target, value in outside:
        in_database = value in here[target]
        if table == "receipt" and not in_database:
            # A receipt may name a source that was gone when it delivered; its record is
            # hash-chained as it stands. Only another project's row would be linked to it.
            continue
        refusals.append((row.line, _refusal(row, table, column, target, value, in_database)))
    for table, rows in file.rows.items():
        if table in SHARED or (table == "receipt" and not receipts) or not rows:
            continue
        pk = TABLES[table]._meta.pk.attname
        taken = _held(TABLES[table], (_key(table, r.values[pk]) for r in rows))
        refusals += [
            (
                r.line,
                f"FILE line {r.line}: {table}.{pk}: {r.values[pk]!r} is already used in this "
                "database (by another project's row); import into an empty database",
            )
            for r in rows
            if _key(table, r.values[pk]) in taken
        ]
    if refusals:
        raise PortabilityError(min(refusals)[1])
