"""The append-only base: the model, queryset and error every append-only table shares, and the
gate that alone lets a change through.

The injection log (``audit_app``) and the graph change log (``graph_app``) refuse, in the ORM,
``save()`` of an existing row, ``delete()`` and queryset ``update()``/``delete()``; their
database triggers refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL). The retention purge
and erasure must still remove rows: they hold the gate, which this module keeps per thread and
per connection. SQLite's triggers ask it through ``memoryproject_gate_open()``, a function
registered on each of this service's own connections (``gate_function_install``), so any
other connection (the sqlite3 shell, another program) has no such function and its UPDATE or
DELETE fails whatever the tables hold.

Opening the gate is ``audit_app.gate.audit_maintenance``: it signs a grant into the witness
first (PostgreSQL's triggers look for the grant's row) and then holds the gate here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, models
from django.db.backends.base.base import BaseDatabaseWrapper

#: The SQLite function the triggers call (audit migration 0009, graph migrations).
GATE_FUNCTION = "memoryproject_gate_open"

_gate = threading.local()


class AppendOnlyError(Exception):
    """An attempt to change or remove a row of an append-only table outside the gate."""


def maintenance_open(using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether this thread holds the gate open on connection ``using``."""
    return getattr(_gate, using, 0) > 0


@contextmanager
def gate_held(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Holds the gate in this thread for the current transaction, without a grant: SQLite's
    triggers ask this thread; on PostgreSQL the caller must have inserted the transaction's
    grant (``audit_maintenance`` does both)."""
    depth = getattr(_gate, using, 0)
    setattr(_gate, using, depth + 1)
    try:
        yield
    finally:
        setattr(_gate, using, depth)


def gate_function_install(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """connection_created receiver: gives each SQLite connection of this service the function
    its triggers call."""
    if connection.vendor != "sqlite":
        return
    alias = connection.alias

    def gate_open() -> int:
        return 1 if maintenance_open(alias) else 0

    connection.connection.create_function(GATE_FUNCTION, 0, gate_open, deterministic=False)


def _refuse(model: type[models.Model], action: str, using: str | None) -> None:
    if not maintenance_open(using or DEFAULT_DB_ALIAS):
        raise AppendOnlyError(
            f"{model.__name__} is append-only: {action} refused (rows are only appended; "
            "erasure and the retention purge are the only ways out)"
        )


class AppendOnlyQuerySet(models.QuerySet[Any]):
    def update(self, **kwargs: Any) -> int:
        _refuse(self.model, "update()", self.db)
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        _refuse(self.model, "delete()", self.db)
        return super().delete()

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        _refuse(self.model, "bulk_update()", self.db)
        return super().bulk_update(objs, fields, batch_size=batch_size)


AppendOnlyManager = models.Manager.from_queryset(AppendOnlyQuerySet)


class AppendOnlyModel(models.Model):
    objects = AppendOnlyManager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            _refuse(type(self), "save() of an existing row", kwargs.get("using") or self._state.db)
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        _refuse(type(self), "delete()", kwargs.get("using") or self._state.db)
        return super().delete(*args, **kwargs)
