"""Statements for the calls made on every request, without the ORM building each query anew.

Building a query with the ORM costs several times running it. Measured on the same rows (one
row by key or a few by index, median of 5 x 3,000 calls, Python 3.11, 2 shared cores), a
statement made once here against the ORM's ``filter().first()``, ``values_list()`` or
``exists()``: on SQLite 26-100 us against 365-560 us (the graph head 35 against 489, an entity
by id 100 against 563, the approved-review probe 28 against 429, the open findings 38 against
391); on PostgreSQL 115-230 us against 550-1,220 us. ``/v1/plan`` runs a dozen statements (the
key check, the traces, the receipt and its chain head), ``/v1/compile`` and every graph write a
handful, so that cost decided their throughput.

Here the SQL is built once per model from the models' own metadata (table and column names,
each field's conversion to a database value), so it follows the models, and runs on SQLite and
PostgreSQL alike; reads that answer model instances go through ``Manager.raw``, which applies
the fields' conversions from the database. The statements themselves stay beside their callers,
each on one of those paths: the API key and its projects (``memoryproject.projects``), the
plan's traces (``sessions_app.selectors``), the injection log's head and texts
(``audit_app.injection_log``), the approved-review probe (``audit_app.reviews``), the open
findings read by every compile (``audit_app.finding_selectors``), the graph head
(``graph_app.graph_head``), an entity and its facts and episodes (``graph_app.entity_reads``),
entity ids and fact closure on every write (``graph_app.entity_writes``,
``graph_app.fact_writes``). What is not on a hot path uses the ORM.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import cache, lru_cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, models

from memoryproject.sqlite3.base import converted

M = TypeVar("M", bound=models.Model)


def quote(name: str, using: str = DEFAULT_DB_ALIAS) -> str:
    return str(connections[using].ops.quote_name(name))


def table(model: type[models.Model], using: str = DEFAULT_DB_ALIAS) -> str:
    """The model's quoted table name."""
    return quote(model._meta.db_table, using)


def column(model: type[models.Model], field: str, using: str = DEFAULT_DB_ALIAS) -> str:
    """The quoted column of ``field`` (a field name, or ``pk``)."""
    meta = model._meta
    target = meta.pk if field == "pk" else meta.get_field(field)
    return quote(str(target.column), using)  # type: ignore[union-attr]


def columns(model: type[models.Model], fields: Iterable[str], using: str = DEFAULT_DB_ALIAS) -> str:
    return ", ".join(column(model, name, using) for name in fields)


def _direct(connection: Any) -> Any:
    """The SQLite connection to run a statement on without a cursor wrapper
    (``memoryproject.sqlite3``), or None: Django's cursor runs it."""
    direct = getattr(connection, "direct", None)
    return direct() if direct is not None else None


def fetch(sql: str, params: Sequence[Any] = (), using: str = DEFAULT_DB_ALIAS) -> list[tuple]:
    connection = connections[using]
    direct = _direct(connection)
    if direct is not None:
        with connection.wrap_database_errors:
            return list(direct.execute(converted(sql), params).fetchall())
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def execute(sql: str, params: Sequence[Any] = (), using: str = DEFAULT_DB_ALIAS) -> int:
    """Runs one statement; answers the rows it changed."""
    connection = connections[using]
    direct = _direct(connection)
    if direct is not None:
        with connection.wrap_database_errors:
            return int(direct.execute(converted(sql), params).rowcount)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def _field(model: type[models.Model], name: str) -> models.Field:
    meta = model._meta
    field = meta.pk if name == "pk" else meta.get_field(name)
    return field  # type: ignore[return-value]


def field_names(model: type[models.Model]) -> tuple[str, ...]:
    """Every concrete field's name: what a whole instance is read from."""
    return tuple(field.name for field in model._meta.concrete_fields)


def select(model: type[models.Model], fields: Sequence[str], using: str = DEFAULT_DB_ALIAS) -> str:
    """``SELECT <fields' columns> FROM <table>``; the caller adds its WHERE."""
    return f"SELECT {columns(model, fields, using)} FROM {table(model, using)}"


def rows(
    model: type[models.Model],
    fields: Sequence[str],
    statement: str,
    params: Sequence[Any] = (),
    using: str = DEFAULT_DB_ALIAS,
) -> list[tuple[Any, ...]]:
    """The rows ``statement`` answers, its columns being ``fields`` of ``model`` in order, each
    value converted as the ORM converts it (aware datetimes, UUIDs, decoded JSON)."""
    convert = row_converter(model, fields, using)
    return [convert(raw) for raw in fetch(statement, params, using)]


# Per connection (each thread has its own): the converters of each (model, columns) read.
_converters_kept: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], list[Any]]] = (
    weakref.WeakKeyDictionary()
)


def row_converter(
    model: type[models.Model], fields: Sequence[str], using: str = DEFAULT_DB_ALIAS
) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """What turns a raw row whose columns are ``fields`` of ``model`` into the values the ORM
    would give (``rows`` applies it to every row it reads)."""
    connection = connections[using]
    kept = _converters_kept.setdefault(connection, {})
    converters = kept.get((model, tuple(fields)))
    if converters is None:
        converters = []
        for name in fields:
            field = _field(model, name)
            column_ref = field.get_col(model._meta.db_table)
            # What the ORM's compiler applies to a selected column: the backend's, then the
            # field's.
            found = connection.ops.get_db_converters(column_ref)
            found += field.get_db_converters(connection)  # type: ignore[attr-defined]
            converters.append((found, column_ref))
        kept[(model, tuple(fields))] = converters

    def convert(raw: Sequence[Any]) -> tuple[Any, ...]:
        values = list(raw)
        for i, (found, column_ref) in enumerate(converters):
            for step in found:
                values[i] = step(values[i], column_ref, connection)
        return tuple(values)

    return convert


def instances(
    model: type[M],
    fields: Sequence[str],
    statement: str,
    params: Sequence[Any] = (),
    using: str = DEFAULT_DB_ALIAS,
) -> list[M]:
    """The rows ``statement`` answers as model instances (``Model.from_db``), its columns being
    ``fields`` in the model's field order (the primary key among them; the others are left
    deferred)."""
    return [instance_from(model, fields, raw, using) for raw in fetch(statement, params, using)]


def instance_from(
    model: type[M], fields: Sequence[str], raw: Sequence[Any], using: str = DEFAULT_DB_ALIAS
) -> M:
    """A model instance from a raw row (or part of one) whose columns are ``fields``, as
    ``instances`` makes each."""
    names = [_field(model, n).attname for n in fields]
    return model.from_db(using, names, row_converter(model, fields, using)(raw))


def first(
    model: type[M],
    fields: Sequence[str],
    statement: str,
    params: Sequence[Any] = (),
    using: str = DEFAULT_DB_ALIAS,
) -> M | None:
    """The first of ``instances``, or None."""
    found = instances(model, fields, statement, params, using)
    return found[0] if found else None


@cache
def _insert_fields(model: type[models.Model]) -> tuple[models.Field, ...]:
    """The fields an INSERT writes: every concrete one but an automatic primary key."""
    return tuple(
        field
        for field in model._meta.concrete_fields
        if not (field.primary_key and isinstance(field, models.AutoField))
    )


@cache
def _insert_names(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(field.name for field in _insert_fields(model))


def _insert_sql(model: type[models.Model], rows: int, using: str) -> str:
    """The INSERT of ``rows`` new rows of every inserted field (built once per row count)."""
    return _insert_rows_sql(model, _insert_names(model), rows, using)


def value(model: type[models.Model], field: str, data: Any, using: str = DEFAULT_DB_ALIAS) -> Any:
    """``data`` as the database stores ``model.field`` (the field's own conversion)."""
    return model._meta.get_field(field).get_db_prep_save(data, connections[using])  # type: ignore[union-attr]


#: Fields whose stored value is the Python value itself when it is None or of exactly this type
#: (their own conversion answers it unchanged: ``str(s)``, ``int(i)``, ``float(f)``, a bool).
#: Exact classes only: a subclass may convert in its own way.
_STORED_AS_IS: dict[type[models.Field], type] = {
    models.CharField: str,
    models.TextField: str,
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveBigIntegerField: int,
    models.SmallIntegerField: int,
    models.AutoField: int,
    models.BigAutoField: int,
    models.FloatField: float,
    models.BooleanField: bool,
}


def _prepared(instance: models.Model, fields: Iterable[models.Field], using: str) -> list[Any]:
    connection = connections[using]
    found = []
    for field in fields:
        data = getattr(instance, field.attname)
        kind = _STORED_AS_IS.get(type(field))
        if kind is not None and (data is None or type(data) is kind):
            found.append(data)
        else:
            found.append(field.get_db_prep_save(data, connection))
    return found


def values_of(
    instance: models.Model, fields: Sequence[str], using: str = DEFAULT_DB_ALIAS
) -> list[Any]:
    """The instance's ``fields`` as the database stores them (foreign keys as their ids)."""
    return _prepared(instance, [_field(type(instance), name) for name in fields], using)


def _values(instance: models.Model, using: str) -> list[Any]:
    return _prepared(instance, _insert_fields(type(instance)), using)


def insert(instance: models.Model, using: str = DEFAULT_DB_ALIAS) -> None:
    """INSERTs one new instance and sets its primary key (as ``save(force_insert=True)`` does,
    without signals: hot-path models have no receivers)."""
    model = type(instance)
    connection = connections[using]
    sql = _insert_sql(model, 1, using)
    pk = model._meta.pk
    assert pk is not None
    automatic = isinstance(pk, models.AutoField)
    if automatic and connection.features.can_return_columns_from_insert:
        sql += f" RETURNING {quote(pk.column, using)}"
    direct = _direct(connection)
    if direct is not None and (not automatic or connection.features.can_return_columns_from_insert):
        with connection.wrap_database_errors:
            cursor = direct.execute(converted(sql), _values(instance, using))
            if automatic:
                setattr(instance, pk.attname, cursor.fetchone()[0])
        instance._state.adding = False
        instance._state.db = using
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, _values(instance, using))
        if automatic:
            if connection.features.can_return_columns_from_insert:
                value = cursor.fetchone()[0]
            else:
                value = connection.ops.last_insert_id(cursor, model._meta.db_table, pk.column)
            setattr(instance, pk.attname, value)
    instance._state.adding = False
    instance._state.db = using


@lru_cache(maxsize=256)
def _insert_rows_sql(
    model: type[models.Model], fields: tuple[str, ...], rows: int, using: str
) -> str:
    """The INSERT of ``rows`` rows of ``fields`` (built once per model, fields, row count and
    database)."""
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    return (
        f"INSERT INTO {table(model, using)} ({columns(model, fields, using)})"
        f" VALUES {', '.join([one] * rows)}"
    )


def insert_rows(
    model: type[models.Model],
    fields: tuple[str, ...],
    rows: Sequence[Sequence[Any]],
    using: str = DEFAULT_DB_ALIAS,
) -> None:
    """INSERTs rows given as values of ``fields`` (foreign keys by id) as the database stores
    them, in one statement per batch: no model instances are made, so values that need no
    conversion (numbers, text, None; the hot path's index rows) go in as they are."""
    batch = max(1, 900 // len(fields))  # under SQLite's limit on parameters
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        params = [value for row in chunk for value in row]
        execute(_insert_rows_sql(model, fields, len(chunk), using), params, using)


def for_update(using: str = DEFAULT_DB_ALIAS) -> str:
    """`` FOR UPDATE`` where the database locks rows read (PostgreSQL); SQLite's write
    transaction already holds the whole database."""
    return " FOR UPDATE" if connections[using].features.has_select_for_update else ""


def change_stamp(using: str = DEFAULT_DB_ALIAS) -> tuple[Any, int, int] | None:
    """What moves whenever the database may have changed, as this thread's connection sees it:
    on SQLite the connection itself, ``PRAGMA data_version`` (it moves with every commit of any
    other connection, other processes' included) and the connection's own count of changed rows
    (its own writes, committed or not). Equal stamps: nothing was written in between. None on
    other databases, where a read must be made again."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        return None
    connection.ensure_connection()
    raw = connection.connection
    (version,) = raw.execute("PRAGMA data_version").fetchone()
    return raw, int(version), int(raw.total_changes)
