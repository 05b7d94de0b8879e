"""memoryproject.sqlite3: Django's SQLite backend with each statement's placeholders converted
once. The answers are Django's: literal percent signs, named parameters and long statements
(converted each time) included; the connection serves Django's ORM and migrations unchanged."""

from __future__ import annotations

import pytest
from django.db import connection

from memoryproject.models import Project
from memoryproject.sqlite3.base import CACHED_LENGTH, _converted

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite backend only")
    assert connection.settings_dict["ENGINE"] == "memoryproject.sqlite3"


def _one(sql: str, params: object) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return tuple(cursor.fetchone())


def test_a_statement_answers_the_same_when_its_conversion_is_kept() -> None:
    sql = "SELECT %s || '%%', %s * 2, '%%s'"
    _converted.cache_clear()
    first = _one(sql, ["a", 21])
    second = _one(sql, ["b", 5])
    assert first == ("a%", 42, "%s")
    assert second == ("b%", 10, "%s")
    assert _converted.cache_info().hits >= 1


def test_named_parameters_and_long_statements_are_converted_as_django_does() -> None:
    assert _one("SELECT %(x)s + %(y)s", {"x": 2, "y": 3}) == (5,)
    values = list(range(CACHED_LENGTH // 3))
    sql = "SELECT count(*) FROM (SELECT 1 WHERE 7 IN (" + ", ".join(["%s"] * len(values)) + "))"
    assert len(sql) > CACHED_LENGTH
    _converted.cache_clear()
    assert _one(sql, values) == (1,)
    assert _converted.cache_info().currsize == 0  # not kept


def test_the_orm_reads_and_writes_through_it() -> None:
    Project.objects.create(slug="percent-100", name="100% sure")
    assert Project.objects.get(name__contains="0% s").slug == "percent-100"
    assert Project.objects.filter(slug__in=["percent-100", "nope"]).count() == 1


def test_another_thread_is_refused_the_connection_unless_it_is_shared() -> None:
    """The thread check answers as Django's: the creating thread's own use is let through at
    once, another thread gets Django's error, and a connection shared for it is allowed."""
    import threading

    from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

    wrapper = connections[DEFAULT_DB_ALIAS]  # this thread's (``connection`` is per thread)
    wrapper.ensure_connection()
    assert not wrapper.allow_thread_sharing
    outcome: list[object] = []

    def use() -> None:
        try:
            wrapper.validate_thread_sharing()
            outcome.append("allowed")
        except DatabaseError as error:
            outcome.append(error)

    def in_thread() -> object:
        worker = threading.Thread(target=use)
        worker.start()
        worker.join()
        return outcome.pop()

    wrapper.validate_thread_sharing()  # the creating thread
    refused = in_thread()
    assert isinstance(refused, DatabaseError)
    assert "can only be used in that same thread" in str(refused)
    wrapper.inc_thread_sharing()
    try:
        assert in_thread() == "allowed"
    finally:
        wrapper.dec_thread_sharing()
    assert isinstance(in_thread(), DatabaseError)


def test_the_hot_path_statements_run_directly_and_answer_as_through_django() -> None:
    """``memoryproject.sql`` runs its statements on the DB-API connection (no cursor wrapper):
    the same rows, the primary key an insert gives, the rows an update changed; errors raised
    as Django's own classes."""
    from django.db import IntegrityError, OperationalError

    from memoryproject import sql

    connection.ensure_connection()
    assert connection.direct() is connection.connection
    from memoryproject.timeutil import utcnow

    project = Project(slug="direct-1", name="50% direct", created_at=utcnow())
    sql.insert(project)
    assert project.pk is not None and not project._state.adding
    query = sql.select(Project, ["pk", "slug", "name"]) + ' WHERE "slug" = %s'
    assert sql.fetch(query, ["direct-1"]) == [(project.pk, "direct-1", "50% direct")]
    assert sql.fetch(query, ["direct-1"]) == [_one(query, ["direct-1"])]
    update = f'UPDATE {sql.table(Project)} SET "name" = %s WHERE "slug" = %s'
    assert sql.execute(update, ["x", "direct-1"]) == 1
    with pytest.raises(IntegrityError):
        sql.insert(Project(slug="direct-1", name="again", created_at=utcnow()))
    with pytest.raises(OperationalError):
        sql.fetch("SELECT * FROM no_such_table WHERE 1 = %s", [1])


def test_statements_django_would_observe_or_refuse_go_through_its_cursor() -> None:
    """The query log (DEBUG, a test capturing queries) and execute wrappers see the hot path's
    statements; a transaction broken by an earlier error refuses them, as Django does."""
    from django.db import transaction
    from django.db.transaction import TransactionManagementError
    from django.test.utils import CaptureQueriesContext

    from memoryproject import sql

    query = sql.select(Project, ["pk"]) + ' WHERE "slug" = %s'
    with CaptureQueriesContext(connection) as captured:
        assert connection.direct() is None
        sql.fetch(query, ["nope"])
    assert [q["sql"] for q in captured.captured_queries] == [query.replace("%s", "'nope'")]
    seen: list[str] = []

    def watch(execute, sql_text, params, many, context):  # type: ignore[no-untyped-def]
        seen.append(sql_text)
        return execute(sql_text, params, many, context)

    with connection.execute_wrapper(watch):
        sql.fetch(query, ["nope"])
    assert seen == [query]
    with transaction.atomic():
        transaction.set_rollback(True)
        with pytest.raises(TransactionManagementError):
            sql.fetch(query, ["nope"])
