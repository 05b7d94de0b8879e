"""Django's SQLite backend, with each statement's placeholders converted once per process.

Django writes SQL with ``%s`` placeholders and its SQLite backend turns them into ``?`` with a
regular expression on every execution: about 7 µs for a statement of 300 to 400 characters,
7 % of a plan's instructions (callgrind, 200 plans through the WSGI handler: 6.82 M against
6.36 M each). The statements a service runs are a few hundred templates, so the converted text
is kept per template. Long statements (bulk inserts, ``IN`` lists of many values) are
converted each time: they are as many templates as lengths, and each is paid for by its rows.
Everything else is Django's backend unchanged (``vendor`` is still ``"sqlite"``).
"""

from __future__ import annotations

import _thread
from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base

# Statements up to this length are kept once converted, up to TEMPLATES of them.
CACHED_LENGTH = 4096
TEMPLATES = 2048


@lru_cache(maxsize=TEMPLATES)
def _converted(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None and len(query) <= CACHED_LENGTH:
            return _converted(query)
        return str(super().convert_query(query, param_names=param_names))  # type: ignore[misc]


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name: Any = None) -> SQLiteCursorWrapper:
        return self.connection.cursor(factory=SQLiteCursorWrapper)

    def validate_thread_sharing(self) -> None:
        """Django's check, the creating thread's own use found first: Django asks first whether
        the connection is shared, under a lock, on every cursor and commit."""
        if self._thread_ident != _thread.get_ident():
            super().validate_thread_sharing()
