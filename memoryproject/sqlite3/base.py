"""Django's SQLite backend, with each statement's placeholders converted once per process, and
the hot path's own statements run on the DB-API connection directly.

Django writes SQL with ``%s`` placeholders and its SQLite backend turns them into ``?`` with a
regular expression on every execution: about 7 µs for a statement of 300 to 400 characters,
7 % of a plan's instructions (callgrind, 200 plans through the WSGI handler: 6.82 M against
6.36 M each). The statements a service runs are a few hundred templates, so the converted text
is kept per template. Long statements (bulk inserts, ``IN`` lists of many values) are
converted each time: they are as many templates as lengths, and each is paid for by its rows.

``memoryproject.sql`` runs the statements of every request (the key check, the traces, the
receipt and its chain head) through ``DatabaseWrapper.direct``: on the DB-API connection, with
the placeholders converted here and errors raised as Django's, without making a cursor wrapper
for each (its health check, thread check, debug-log check and wrappers came to 7 % of a plan's
instructions: 6.65 M against 6.18 M under callgrind, 2026-12-05). Whenever Django would observe a statement
(an execute wrapper installed, the query log on: ``DEBUG``, a test capturing queries) or refuse
it (a transaction broken by an earlier error), the statement goes through Django's cursor.

Everything else is Django's backend unchanged (``vendor`` is still ``"sqlite"``).
"""

from __future__ import annotations

import _thread
import sqlite3
from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base

# Statements up to this length are kept once converted, up to TEMPLATES of them.
CACHED_LENGTH = 4096
TEMPLATES = 2048


def _qmark(query: str) -> str:
    """Django's conversion of ``%s`` placeholders (positional parameters) to ``?``."""
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


_converted = lru_cache(maxsize=TEMPLATES)(_qmark)


def converted(query: str) -> str:
    """``query`` with ``%s`` placeholders as SQLite's ``?``: kept once converted when it is
    short enough to be a template."""
    return _converted(query) if len(query) <= CACHED_LENGTH else _qmark(query)


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return converted(query)
        return str(super().convert_query(query, param_names=param_names))  # type: ignore[misc]


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name: Any = None) -> SQLiteCursorWrapper:
        return self.connection.cursor(factory=SQLiteCursorWrapper)

    def direct(self) -> sqlite3.Connection | None:
        """The DB-API connection for a statement with positional parameters (its text through
        ``converted``, run within ``wrap_database_errors``), or None when Django's cursor must
        run it: not connected, statements observed (an execute wrapper, the query log) or the
        transaction broken by an earlier error (Django's cursor refuses it)."""
        if self.connection is None or self.execute_wrappers or self.queries_logged:
            return None
        if self.needs_rollback:
            return None
        return self.connection

    def validate_thread_sharing(self) -> None:
        """Django's check, the creating thread's own use found first: Django asks first whether
        the connection is shared, under a lock, on every cursor and commit."""
        if self._thread_ident != _thread.get_ident():  # type: ignore[attr-defined]
            super().validate_thread_sharing()
