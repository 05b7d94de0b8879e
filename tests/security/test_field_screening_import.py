"""An import screens its rows with the API's screening function: a row holding a
secret, in any screened column, refuses the whole import naming the line, the column and the
kind (never the secret), and writes nothing; instruction-like passages are imported, as the
API keeps them, and listed as warnings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graph_app.entity_writes import entity_upsert
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from memoryproject.models import Project
from sessions_app.plan import plan_context
from sessions_app.trace_writes import trace_record
from tests.core.test_export_import import empty_database, run
from tests.core.test_import_safety import body, line_of, state, write
from tests.security.test_field_screening import AWS, GITHUB, POISON, REDIS, SENDGRID

pytestmark = pytest.mark.django_db


def seed(*, content: str = "The deploy job fails on the second retry.") -> Project:
    project = Project.objects.create(slug="billing", name="Billing")
    episode_record(
        project=project,
        category="incident",
        title="Deploy failures",
        content=content,
        files_touched=["deploy/job.yml"],
        entities_mentioned=["deploy_job"],
        metadata={"ticket": "OPS-1"},
        external_id="OPS-1",
    )
    fact_upsert(project=project, subject_id="deploy_job", predicate="runs_on", object_value="ci")
    entity_upsert(project=project, entity_id="deploy_job", name="Deploy job", aliases=["dj"])
    trace_record(project=project, model="m", active_project="billing", key_files=["a.py"])
    plan_context(project=project, mode="force")
    return project


def _set(column: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(row: dict[str, Any]) -> None:
        row[column] = value

    return change


def _add_key(column: str, key: str) -> Callable[[dict[str, Any]], None]:
    def change(row: dict[str, Any]) -> None:
        row[column] = {**row[column], key: "x"}

    return change


#: (table, how the row is changed, the field the refusal names, the kind, the secret).
EDITS = {
    "trace.model": ("trace", _set("model", f"m {GITHUB}"), "model", "github_token", GITHUB),
    "trace.metadata key": (
        "trace",
        _add_key("metadata", AWS),
        "metadata.[masked:aws_access_key]#key",
        "aws_access_key",
        AWS,
    ),
    "entity.name": ("entity", _set("name", SENDGRID), "name", "sendgrid_key", SENDGRID),
    "entity.slug": ("entity", _set("slug", GITHUB), "slug", "github_token", GITHUB),
    "episode.files_touched": (
        "episode",
        _set("files_touched", ["deploy/job.yml", REDIS]),
        "files_touched[1]",
        "password_in_url",
        "s3cretPassw0rd",
    ),
    "episode_file.path": ("episode_file", _set("path", REDIS), "path", "password_in_url", REDIS),
    "fact.object_value": (
        "fact",
        _set("object_value", f"ci {GITHUB}"),
        "object_value",
        "github_token",
        GITHUB,
    ),
    "receipt.request": (
        "receipt",
        _set("request", {"query": f"deploy {GITHUB}"}),
        "request.query",
        "github_token",
        GITHUB,
    ),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_an_imported_row_holding_a_secret_refuses_the_import(tmp_path, name):
    table, change, field, kind, secret = EDITS[name]
    seed()
    exported = tmp_path / "billing.jsonl"
    assert run("export_memory", "--project", "billing", "--out", str(exported))[0] == 0
    header, rows = body(exported)
    target = next(r for r in rows if r["table"] == table)
    change(target["row"])
    edited = write(tmp_path / "edited.jsonl", header, rows)
    empty_database()
    before = state()
    code, stdout, err = run("import_memory", str(edited))
    assert code == 2, stdout + err
    message = f"FILE line {line_of(rows, target)}: {table}.{field}: must not hold a secret ({kind})"
    assert message in err, err
    assert secret not in stdout + err
    assert state() == before
    if table == "receipt":
        assert "--skip-receipts" in err
        code, stdout, err = run("import_memory", str(edited), "--skip-receipts")
        assert code == 0, stdout + err


def test_instruction_like_rows_are_imported_and_listed_as_warnings(tmp_path):
    seed(content=f"The deploy log said: {POISON}.")
    exported = tmp_path / "billing.jsonl"
    assert run("export_memory", "--project", "billing", "--out", str(exported))[0] == 0
    _, rows = body(exported)
    episode = next(r for r in rows if r["table"] == "episode")
    empty_database()
    code, stdout, err = run("import_memory", str(exported))
    assert code == 0, stdout + err
    line = line_of(rows, episode)
    assert f"warning: FILE line {line}: episode.content: instruction-like passage kept and " in err
    assert "(override: ignore previous instructions)" in err
    assert POISON in Project.objects.get(slug="billing").episodes.get().content
