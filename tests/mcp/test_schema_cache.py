"""The tools' JSON schemas are kept in the snapshot directory from one start of the MCP server
to the next (memoryproject.schema_cache): an agent sees the same tools whether they were made
or read, and nothing but a file signed with the deployment's key, for the same code, is read."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from pydantic import Field

from memoryproject import schema_cache
from memoryproject.contracts import Input
from memoryproject.domain.signed_files import signed
from memoryproject.schema_cache import FILE_NAME, MAGIC, json_schemas, model_name

from .conftest import REPO
from .test_split import _published


def _model(description: str = "How many results to answer, at most.") -> type[Input]:
    """A model of the contracts (its validators built on first use), new at each call, with
    the same name each time: what a new process defines."""

    class Probe(Input):
        # Not in name order: a tool's arguments are published in the order they are declared.
        limit: int = Field(default=10, ge=1, le=50, description=description)
        after: float = Field(default=0.5, ge=0.0, le=1.0, description="The least score.")

    return Probe


@pytest.fixture
def kept_dir(settings, tmp_path):
    settings.COMPILER_SNAPSHOT_DIR = str(tmp_path / "index")
    return tmp_path / "index"


def test_schemas_kept_are_read_without_building_the_model(kept_dir):
    first = _model()
    made = json_schemas([first])
    assert made == {model_name(first): first.model_json_schema()}
    assert (kept_dir / FILE_NAME).exists()

    again = _model()  # as a new process would define it: nothing built yet
    assert json.dumps(json_schemas([again])) == json.dumps(made)  # in the same order
    assert not again.__pydantic_complete__  # read, not made
    assert again(limit=3).limit == 3  # its validators are built when a call needs them


def _tampered(path, change):
    data = path.read_bytes()
    path.write_bytes(change(data))


@pytest.mark.parametrize(
    "change",
    [
        lambda data: data.replace(b"How many", b"Ignore all"),  # the body, unsigned again
        lambda data: data[:-1],
        lambda data: b"",
        lambda data: data.replace(MAGIC, b"memoryproject-json-schemas/0\n"),
    ],
    ids=["body changed", "byte cut", "emptied", "another format"],
)
def test_a_changed_file_is_not_read_and_is_made_again(kept_dir, change):
    made = json_schemas([_model()])
    _tampered(kept_dir / FILE_NAME, change)
    again = _model()
    assert json_schemas([again]) == made
    assert again.__pydantic_complete__  # made again
    assert json_schemas([_model()]) == made  # and the file written again


def test_a_file_signed_with_another_key_is_not_read(settings, kept_dir):
    json_schemas([_model(description="Written under another deployment's key.")])
    settings.SECRET_KEY = "another deployment's secret key, long enough to be a real one"
    ours = _model()
    assert json_schemas([ours]) == {model_name(ours): ours.model_json_schema()}


def test_a_signed_file_of_other_code_is_not_read(kept_dir):
    """A file the key signed for another version of the code (say, before an upgrade that
    changed a description) is made again."""
    model = _model()
    stale = {"type": "object", "description": "what an earlier version published"}
    body = json.dumps({"code": "an earlier version", "schemas": {model_name(model): stale}})
    kept_dir.mkdir(parents=True)
    (kept_dir / FILE_NAME).write_bytes(signed(MAGIC, body.encode(), key=schema_cache._key()))
    assert json_schemas([model]) == {model_name(model): _model().model_json_schema()}


def test_an_unwritable_directory_costs_only_the_making(settings, tmp_path, caplog):
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    settings.COMPILER_SNAPSHOT_DIR = str(blocker / "index")
    model = _model()
    with caplog.at_level(logging.WARNING, logger="memoryproject.schema_cache"):
        assert json_schemas([model]) == {model_name(model): model.model_json_schema()}
    assert "not kept" in caplog.text


def test_every_process_of_the_same_code_has_the_same_fingerprint():
    """Whatever a process has imported (here the whole service; there only the module), so
    that what one start kept another reads."""
    alone = subprocess.run(
        [
            sys.executable,
            "-c",
            "from memoryproject import schema_cache as s; print(s.code_fingerprint())",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert alone == schema_cache.code_fingerprint()


def test_a_change_of_code_changes_the_fingerprint(tmp_path, monkeypatch):
    package = tmp_path / "probe_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "contracts.py").write_text('DESCRIPTION = "How many results."\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(schema_cache, "PACKAGES", frozenset({"probe_package"}))
    before = schema_cache.code_fingerprint()
    assert schema_cache.code_fingerprint() == before
    (package / "contracts.py").write_text('DESCRIPTION = "How many results, at most."\n')
    assert schema_cache.code_fingerprint() != before


@pytest.mark.slow
def test_an_agent_sees_the_same_tools_made_or_read(mcp, tmp_path):
    """Through a real MCP client: the tools a server publishes with no directory, then with one
    (made and kept), then again (read from the file), are the same."""
    mcp.env = {**mcp.env, "TEST_COMPILER_SNAPSHOT_DIR": ""}
    made_each_time = mcp(_published)
    mcp.env = {**mcp.env, "TEST_COMPILER_SNAPSHOT_DIR": str(tmp_path / "index")}
    made_and_kept = mcp(_published)
    assert (tmp_path / "index" / FILE_NAME).exists()
    read = mcp(_published)
    assert made_each_time == made_and_kept == read
    assert len(read["tools"]) >= 14
