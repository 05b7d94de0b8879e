"""The witness in a second database (WITNESS_DATABASE_URL), for several nodes writing one
service database: the same statements, the same verdicts, in tables of another database."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from audit_app.checkpoints import audit_checkpoint_create
from audit_app.selectors import injection_log_verify
from graph_app import graph_head, integrity
from graph_app.fact_writes import fact_upsert
from memoryproject.witness import LOG_STREAM, graph_stream, witness
from tests.audit_app import log_tampering as tamper


def _log_head(project) -> tuple[int, str]:
    """The graph head's change log size and last hash."""
    head = graph_head.graph_head(project)
    return head.changes, head.head_hash


pytestmark = pytest.mark.django_db(transaction=True)

ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(params=["sqlite", "postgresql"])
def witness_database(request, settings, tmp_path) -> Iterator[str]:
    """A second database holding the witness (the directory is not used)."""
    settings.WITNESS_DIR = ""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'witness.sqlite3'}"
        settings.WITNESS_DATABASE_URL = url
        yield url
        return
    name = f"witness_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(ADMIN, autocommit=True)
    except psycopg.Error:
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    admin.execute(f"CREATE DATABASE {name}")
    url = f"postgres://postgres@127.0.0.1:5432/{name}"
    settings.WITNESS_DATABASE_URL = url
    try:
        yield url
    finally:
        found = witness()
        if found is not None and getattr(found.store, "_connection", None) is not None:
            found.store._connection.close()
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


def rows(url: str, statement: str) -> list[tuple]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(statement).fetchall()
    with psycopg.connect(url) as db:
        return db.execute(statement).fetchall()


def execute(url: str, statement: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute(statement)
        return
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(statement)


def test_heads_and_checkpoints_land_in_the_second_database(default_project, witness_database):
    records = tamper.build_log(default_project, 3)
    fact_upsert(project=default_project, subject_id="auth", predicate="owner", object_value="team")
    audit_checkpoint_create()
    heads = dict(rows(witness_database, "SELECT stream, seq FROM memoryproject_witness_head"))
    size, _ = _log_head(default_project)
    assert heads[LOG_STREAM] == 3 and heads[graph_stream(default_project.pk)] == size > 0
    (line,) = rows(witness_database, "SELECT line FROM memoryproject_witness_entry")
    assert json.loads(line[0])["body"]["kind"] == "checkpoint"
    result = injection_log_verify()
    assert result.ok is True and result.witness.witnessed_seq == 3
    assert records[-1].record_hash == witness().read().heads[LOG_STREAM].hash
    assert integrity.integrity_verify(project=default_project).verified is True


def test_a_truncated_log_fails_against_the_database_witness(default_project, witness_database):
    records = tamper.build_log(default_project, 4)
    tamper.delete(3, 4)
    tamper.set_head(2, records[1].record_hash)
    result = injection_log_verify()
    assert result.ok is False
    assert "shorter than witnessed" in result.witness.problems[0]


def test_a_witness_row_edited_or_removed_is_named(default_project, witness_database):
    tamper.build_log(default_project, 2)
    audit_checkpoint_create()
    audit_checkpoint_create()
    execute(witness_database, "DELETE FROM memoryproject_witness_entry WHERE n = 1")
    witness()._parsed = None  # another process reading the store afresh
    result = injection_log_verify()
    assert result.ok is False
    assert "out of order" in result.witness.problems[0]


def test_the_service_database_is_refused_as_its_own_witness(default_project, settings):
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        settings.WITNESS_DATABASE_URL = f"sqlite:///{db['NAME']}"
    else:
        settings.WITNESS_DATABASE_URL = f"postgres://postgres@127.0.0.1:5432/{db['NAME']}"
    result = injection_log_verify()
    assert result.ok is False and result.witness.state == "failed"
    assert "the service's own database" in result.witness.problems[0]
