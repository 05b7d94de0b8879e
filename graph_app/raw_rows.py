"""Rows read by the database driver alone, past the ORM's per-row conversions: verification and
time travel read every row of a project, and converting each would cost more than hashing it.
Datetimes come back aware UTC (on SQLite read as text, which the C ISO parser reads faster than
the driver's converter does).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from django.db import connection
from django.db.models import Model, QuerySet

from memoryproject.domain.instants import stored_instant

#: Rows fetched at a time (and ids read per statement by the readers that chunk them).
READ_CHUNK = 5_000


def rows_read(
    rows: QuerySet[Any], columns: tuple[str, ...], times: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    """``rows.values(*columns)`` read by the database driver alone, ``times`` made aware
    UTC (SQLite's driver hands them naive): verification reads every row, and the ORM's
    per-row conversions would cost more than hashing them. Only for columns the driver reads
    as their Python values (not JSON)."""
    sql, params = rows.values_list(*columns).query.sql_with_params()
    return rows_run(times_as_text(sql, rows.model, times), params, columns, times)


def rows_run(
    sql: str, params: Sequence[Any], columns: tuple[str, ...], times: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    """The rows of ``sql`` as ``rows_read`` answers them."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(READ_CHUNK):
            for values in chunk:
                row = dict(zip(columns, values, strict=True))
                for name in times:
                    row[name] = stored_instant(row[name])
                yield row


def times_as_text(sql: str, model: type[Model], times: tuple[str, ...]) -> str:
    """On SQLite, ``sql`` reading the ``times`` columns of ``model``'s table as text, which
    the C ISO parser reads faster than the driver's converter does."""
    if connection.vendor != "sqlite":
        return sql
    table = model._meta.db_table
    for name in times:
        column = f'"{table}"."{name}"'
        sql = sql.replace(column, f"CAST({column} AS TEXT)", 1)
    return sql
