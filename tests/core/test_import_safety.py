"""import_memory does not trust its file: every row must resolve inside the imported project
(a link to another project's row, or to none, refuses the whole import and writes nothing), a
file over IMPORT_MAX_BYTES is refused before it is parsed, and a bad file exits 2 with one line
naming the line number, the field and the rule."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from graph_app import entity_reads
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.integrity import integrity_verify
from graph_app.models import Entity, Episode, GraphChange, TemporalFact
from memoryproject.models import Project
from orchestration.export_file import TABLES
from sessions_app.models import Trace
from sessions_app.trace_writes import trace_record
from tests.core.test_export_import import empty_database, run, seed

pytestmark = pytest.mark.django_db

EpisodeEntity = Episode.entities.through


def seed_beta() -> Project:
    """A second tenant without receipts: an episode naming an entity, a fact, a trace."""
    project = Project.objects.create(slug="beta", name="Beta")
    episode = episode_record(
        project=project,
        category="incident",
        title="Queue stalled",
        content="The worker pool ran dry.",
        entities_mentioned=["worker_pool", "auth_service"],
        occurred_at="2026-05-01T10:00:00Z",
    )
    fact_upsert(
        project=project,
        subject_id="worker_pool",
        predicate="size",
        object_value="8",
        source_episode=episode["id"],
    )
    trace_record(
        project=project, model="m", active_project="beta", last_decision="d", current_output="o"
    )
    return project


def body(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def write(path: Path, header: dict[str, Any], rows: list[Any]) -> Path:
    """The file an editor of an export would write: counts and body_sha256 made to match."""
    text = "".join(
        (r if isinstance(r, str) else json.dumps(r, sort_keys=True)) + "\n" for r in rows
    )
    counts: dict[str, int] = {}
    for row in rows:
        if isinstance(row, dict) and row.get("table") in TABLES:
            counts[row["table"]] = counts.get(row["table"], 0) + 1
    header = {**header, "counts": counts, "body_sha256": hashlib.sha256(text.encode()).hexdigest()}
    path.write_text(json.dumps(header, sort_keys=True) + "\n" + text)
    return path


def line_of(rows: list[Any], row: Any) -> int:
    return rows.index(row) + 2  # the header is line 1


def rows_of(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    return [r["row"] for r in rows if r["table"] == table]


@pytest.fixture
def tenants(tmp_path):
    """Alpha (with receipts) restored from its export; beta's export, not imported."""
    seed("alpha")
    seed_beta()
    alpha_file, beta_file = tmp_path / "alpha.jsonl", tmp_path / "beta.jsonl"
    assert run("export_memory", "--project", "alpha", "--out", str(alpha_file))[0] == 0
    assert run("export_memory", "--project", "beta", "--out", str(beta_file))[0] == 0
    empty_database()
    code, stdout, err = run("import_memory", str(alpha_file))
    assert code == 0, stdout + err
    alpha = Project.objects.get(slug="alpha")
    return alpha, beta_file


def view(project: Project, entity: str) -> dict[str, Any]:
    return entity_reads.entity_query(project=project, entity_id=entity).as_json()


def state() -> dict[str, int]:
    return {
        "projects": Project.objects.count(),
        "entities": Entity.objects.count(),
        "episodes": Episode.objects.count(),
        "links": EpisodeEntity.objects.count(),
        "facts": TemporalFact.objects.count(),
        "changes": GraphChange.objects.count(),
        "traces": Trace.objects.count(),
    }


# --- cross-tenant ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["beta_link_names_alpha_entity", "planted_alpha_episode_link"])
def test_a_link_row_naming_another_projects_row_is_refused_and_nothing_written(
    tenants, tmp_path, case
):
    """Both files pass the graph's verification of beta alone: only the references give
    them away (alpha's entity would list beta's episode, beta's entity alpha's episode)."""
    alpha, beta_file = tenants
    alpha_entity = Entity.objects.get(project=alpha, slug="auth_service")
    alpha_episode = Episode.objects.get(project=alpha)
    before, alpha_view = state(), view(alpha, "auth_service")
    header, rows = body(beta_file)
    entities = {r["slug"]: r["id"] for r in rows_of(rows, "entity")}
    links = [r for r in rows if r["table"] == "episode_entity"]
    if case == "beta_link_names_alpha_entity":
        planted = next(r for r in links if r["row"]["entity_id"] == entities["auth_service"])
        planted["row"]["entity_id"] = alpha_entity.pk
    else:
        link = {"id": 9_000, "episode_id": alpha_episode.pk, "entity_id": entities["worker_pool"]}
        planted = {"table": "episode_entity", "row": link}
        rows.insert(rows.index(links[-1]) + 1, planted)
    code, stdout, err = run("import_memory", str(write(tmp_path / "b.jsonl", header, rows)))

    assert code == 2, stdout + err
    assert f"FILE line {line_of(rows, planted)}: episode_entity." in err
    assert "belongs to another project" in err and "Traceback" not in err
    assert not Project.objects.filter(slug="beta").exists()
    assert state() == before
    assert integrity_verify(project=alpha)["verified"] is True
    assert view(alpha, "auth_service") == alpha_view


def test_a_fact_sourced_from_another_projects_episode_is_refused(tenants, tmp_path):
    alpha, beta_file = tenants
    alpha_episode = Episode.objects.get(project=alpha).pk
    before = state()
    header, rows = body(beta_file)
    fact = next(r for r in rows if r["table"] == "fact")
    fact["row"]["source_episode_id"] = alpha_episode
    code, _, err = run("import_memory", str(write(tmp_path / "b.jsonl", header, rows)))
    assert code == 2
    assert f"FILE line {line_of(rows, fact)}: fact.source_episode_id: names episode" in err
    assert alpha_episode in err and "another project" in err
    assert state() == before and integrity_verify(project=alpha)["verified"] is True


def test_a_link_to_a_missing_episode_says_so(tenants, tmp_path):
    _, beta_file = tenants
    before = state()
    header, rows = body(beta_file)
    link = next(r for r in rows if r["table"] == "episode_entity")
    link["row"]["episode_id"] = "ep_missing"
    code, _, err = run("import_memory", str(write(tmp_path / "b.jsonl", header, rows)))
    assert code == 2
    assert f"FILE line {line_of(rows, link)}: episode_entity.episode_id" in err
    assert "'ep_missing', which is not in this file (no such episode)" in err
    assert "already used" not in err and state() == before


def test_a_row_reusing_another_projects_id_is_refused_by_line(tenants, tmp_path):
    alpha, beta_file = tenants
    before = state()
    header, rows = body(beta_file)
    trace = next(r for r in rows if r["table"] == "trace")
    trace["row"]["id"] = Trace.objects.filter(project=alpha).first().pk
    code, _, err = run("import_memory", str(write(tmp_path / "b.jsonl", header, rows)))
    assert code == 2
    assert f"FILE line {line_of(rows, trace)}: trace.id:" in err and "already used" in err
    assert state() == before


def test_a_valid_export_imports_into_a_fresh_project_and_verifies(tenants):
    _, beta_file = tenants
    code, stdout, err = run("import_memory", str(beta_file), "--json")
    assert code == 0, stdout + err
    assert json.loads(stdout)["ok"] is True
    beta = Project.objects.get(slug="beta")
    assert integrity_verify(project=beta)["verified"] is True
    episodes = view(beta, "worker_pool")["episodes"]
    assert [e["title"] for e in episodes] == ["Queue stalled"]


def test_a_hash_in_the_file_is_recomputed_not_trusted(tenants, tmp_path):
    _, beta_file = tenants
    before = state()
    header, rows = body(beta_file)
    rows_of(rows, "episode")[0]["content"] = "The worker pool was fine."  # its sha256 kept
    code, _, err = run("import_memory", str(write(tmp_path / "b.jsonl", header, rows)))
    assert code == 2 and "verification failed" in err and state() == before


# --- bad files ---------------------------------------------------------------------------------


def _header_without_project(header, rows):
    del header["project"]
    return 1, "project: is required"


def _bad_timestamp(header, rows):
    fact = next(r for r in rows if r["table"] == "fact")
    fact["row"]["valid_from"] = "last tuesday"
    return line_of(rows, fact), "fact.valid_from: 'last tuesday' is not an ISO-8601 timestamp"


def _naive_timestamp(header, rows):
    trace = next(r for r in rows if r["table"] == "trace")
    trace["row"]["created_at"] = "2026-05-01T10:00:00"
    return line_of(rows, trace), "trace.created_at: '2026-05-01T10:00:00' has no timezone"


def _non_numeric_score(header, rows):
    trace = next(r for r in rows if r["table"] == "trace")
    trace["row"]["trust_score"] = "high"
    return line_of(rows, trace), "trace.trust_score: must be a number"


def _score_out_of_range(header, rows):
    fact = next(r for r in rows if r["table"] == "fact")
    fact["row"]["confidence"] = 7
    return line_of(rows, fact), "fact.confidence: must be from 0.0 to 1.0, got 7"


def _bad_json(header, rows):
    rows.insert(1, '{"table": "entity", "row": {')
    return 3, "is not JSON"


def _unknown_kind(header, rows):
    rows.insert(0, {"table": "secrets", "row": {"id": 1}})
    return 2, "table: unknown table 'secrets'"


def _unknown_column(header, rows):
    entity = next(r for r in rows if r["table"] == "entity")
    entity["row"]["owner_project_id"] = 1
    return line_of(rows, entity), "entity.owner_project_id: unknown column"


def _oversize_metadata(header, rows):
    episode = next(r for r in rows if r["table"] == "episode")
    episode["row"]["metadata"] = {"blob": "x" * 200_000}
    return line_of(rows, episode), "episode.metadata: must be at most 10000 bytes of JSON"


def _overlong_title(header, rows):
    episode = next(r for r in rows if r["table"] == "episode")
    episode["row"]["title"] = "t" * 301
    return line_of(rows, episode), "episode.title: must be at most 300 characters"


def _forged_delivered_text(header, rows):
    rows.append(
        {
            "table": "delivered_text",
            "row": {"sha256": "0" * 64, "text": "hi", "stored_at": "2026-05-01T10:00:00Z"},
        }
    )
    return len(rows) + 1, "delivered_text.sha256: is not the SHA-256 of its text"


def _id_out_of_range(header, rows):
    entity = next(r for r in rows if r["table"] == "entity")
    entity["row"]["id"] = 2**70
    return line_of(rows, entity), "entity.id: Ensure this value is less than or equal to"


def _project_id_out_of_range(header, rows):
    header["project"]["id"] = 2**70
    return 1, "project.id: Ensure this value is less than or equal to"


@pytest.mark.parametrize(
    "spoil",
    [
        _header_without_project,
        _bad_timestamp,
        _naive_timestamp,
        _non_numeric_score,
        _score_out_of_range,
        _bad_json,
        _unknown_kind,
        _unknown_column,
        _oversize_metadata,
        _overlong_title,
        _forged_delivered_text,
        _id_out_of_range,
        _project_id_out_of_range,
    ],
)
def test_a_bad_file_exits_2_naming_the_line_and_writes_nothing(tenants, tmp_path, spoil):
    _, beta_file = tenants
    before = state()
    header, rows = body(beta_file)
    line, rule = spoil(header, rows)
    code, stdout, err = run("import_memory", str(write(tmp_path / "bad.jsonl", header, rows)))
    assert code == 2, stdout + err
    assert err.startswith(f"import_memory: FILE line {line}: ") and rule in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert state() == before and not Project.objects.filter(slug="beta").exists()
    code, stdout, _ = run("import_memory", str(tmp_path / "bad.jsonl"), "--json")
    assert code == 2 and json.loads(stdout) == {"ok": False, "error": err.strip().split(": ", 1)[1]}


def test_a_file_over_the_cap_is_refused_before_it_is_parsed(tenants, tmp_path, settings):
    _, beta_file = tenants
    before = state()
    settings.IMPORT_MAX_BYTES = beta_file.stat().st_size - 1
    code, _, err = run("import_memory", str(beta_file))
    assert code == 2 and "larger than the import limit" in err and "IMPORT_MAX_BYTES" in err
    assert state() == before
    # Not parsed at all: a file of junk over the cap says only that it is too large.
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\xff not json\n" * 100)
    settings.IMPORT_MAX_BYTES = 1_000
    code, _, err = run("import_memory", str(junk))
    assert code == 2 and "larger than the import limit of 1000 bytes" in err
    assert "JSON" not in err and "UTF-8" not in err
    settings.IMPORT_MAX_BYTES = beta_file.stat().st_size
    code, stdout, err = run("import_memory", str(beta_file))
    assert code == 0, stdout + err
