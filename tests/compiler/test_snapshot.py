"""The compiler's index snapshot: a new process loads it instead of rebuilding from every row,
refreshes it from the change feed when the graph moved on, and never serves a stale, foreign or
damaged one (it rebuilds instead, and the compile still answers).

A new process is an empty in-memory cache: ``compiler_cache_clear`` leaves exactly that.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from blake3 import blake3
from django.db import transaction

from graph_app import snapshot as snapshot_module
from graph_app import text_cache
from graph_app.compiler import context_compile
from graph_app.contracts.compile import CompileResult
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import (
    compiler_cache_clear,
    compiler_cache_forget,
    compiler_warm,
)
from graph_app.models import TemporalFact
from graph_app.snapshot import snapshot_path
from graph_app.text_cache import text_caches_clear
from memoryproject import tokens as tokens_module
from memoryproject.tokens import count_key
from tests.compiler.helpers import stats_of

pytestmark = pytest.mark.django_db

QUERY = "what does payment_service depend on and which token format does it use"
SERVICES = ["ledger_store", "auth_service", "billing_api", "order_worker"]


@pytest.fixture
def graph(default_project):
    for service in SERVICES:
        fact_upsert(
            project=default_project,
            subject_id="payment_service",
            predicate="depends_on",
            object_value=service,
        )
    fact_upsert(
        project=default_project,
        subject_id="payment_service",
        predicate="uses_token_format",
        object_value="JWT_HS256",
    )
    episode_record(
        project=default_project,
        title="ADR: payment_service signs tokens with JWT_HS256",
        category="adr",
        content="payment_service keeps JWT_HS256 until ledger_store supports PASETO.",
        entities_mentioned=["payment_service", "ledger_store"],
    )
    return default_project


def _file_of(project) -> Path:
    path = snapshot_path(project.pk)
    assert path is not None
    return path


def _compile(project):
    return context_compile(project=project, query=QUERY, max_tokens=600)


def test_first_compile_after_start_loads_the_snapshot_instead_of_rebuilding(snapshots, graph):
    built = _compile(graph)
    rows = stats_of(graph)["rows_read"]
    assert rows >= 6  # every fact and the episode
    assert _file_of(graph).exists()

    compiler_cache_clear()  # a new process
    loaded = _compile(graph)
    stats = stats_of(graph)
    assert stats["rows_read"] == 0
    assert stats["restored"] == built["revision"] == stats["revision"]
    assert loaded == built


def test_a_snapshot_written_in_place_while_it_is_restored_is_ignored(
    snapshots, graph, monkeypatch, caplog
):
    """The file is mapped, its signature checked over the map, then its arrays restored from
    the same pages: bytes changed in place after the check are not the bytes checked."""
    built = _compile(graph)
    path = _file_of(graph)
    restore = snapshot_module.index_restore

    def written_meanwhile(*args, **kwargs):
        with path.open("r+b") as out:  # in place: snapshots are only ever renamed into place
            out.seek(0, 2)
            out.write(b"\0")
        return restore(*args, **kwargs)

    monkeypatch.setattr(snapshot_module, "index_restore", written_meanwhile)
    compiler_cache_clear()
    assert _compile(graph) == built
    assert stats_of(graph)["restored"] == -1
    assert "changed while read" in caplog.text


def test_a_snapshot_written_in_place_after_it_was_restored_is_dropped(snapshots, graph, caplog):
    """A restored index reads its columns from the mapped file for as long as it lives: a file
    written in place later (its bytes no longer the ones verified) is never read again; the
    next compile rebuilds from the rows and answers the same."""
    built = _compile(graph)
    compiler_cache_clear()
    assert _compile(graph) == built
    assert stats_of(graph)["restored"] >= 0  # loaded from the file, read in place
    path = _file_of(graph)
    with path.open("r+b") as out:
        out.seek(0, 2)
        out.write(b"\0")
    assert _compile(graph) == built
    stats = stats_of(graph)
    assert stats["restored"] == -1 and stats["rows_read"] > 0
    assert "changed: rebuilt" in caplog.text


def test_a_restored_index_answers_after_its_file_is_replaced(snapshots, graph):
    """Snapshots are replaced by renaming a new file into place: the index restored from the
    old one keeps reading the old file's pages (unlinked, still mapped), undisturbed."""
    built = _compile(graph)
    compiler_cache_clear()
    _compile(graph)
    path = _file_of(graph)
    replacement = path.with_suffix(".new")
    replacement.write_bytes(b"not a snapshot")
    replacement.replace(path)
    assert _compile(graph) == built
    assert stats_of(graph)["restored"] >= 0


def test_no_snapshot_below_the_row_threshold(settings, snapshots, graph):
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 1000
    _compile(graph)
    assert not _file_of(graph).exists()
    compiler_cache_clear()
    _compile(graph)
    assert stats_of(graph)["restored"] == -1


def test_stale_snapshot_is_refreshed_from_the_change_feed_never_served(snapshots, graph):
    old = _compile(graph)
    assert "JWT_HS256" in old["markdown"]
    compiler_cache_clear()
    fact_upsert(
        project=graph,
        subject_id="payment_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
    )

    fresh = _compile(graph)
    stats = stats_of(graph)
    assert stats["restored"] == old["revision"] < fresh["revision"] == stats["revision"]
    # Only the new fact and the one it closed were read, not the whole graph.
    assert stats["rows_read"] == 2
    assert "PASETO_v4_public" in fresh["markdown"]
    closed = TemporalFact.objects.get(project=graph, object_value="JWT_HS256").id
    assert closed in {item["id"] for item in old["items"]}
    assert closed not in {item["id"] for item in fresh["items"]}
    assert fresh["suppressed_stale"] == old["suppressed_stale"] + 1

    compiler_cache_clear()
    rebuilt = _compile(graph)
    assert rebuilt == fresh


class _Undone(Exception):
    pass


def test_snapshot_of_a_history_the_database_no_longer_holds_is_ignored(snapshots, graph):
    """A snapshot taken of writes that were then rolled back (a restored backup): the same
    revision numbers come back with other content, and the snapshot must not be served."""
    with pytest.raises(_Undone), transaction.atomic():
        fact_upsert(
            project=graph,
            subject_id="payment_service",
            predicate="deployed_to",
            object_value="eu_west_cluster",
        )
        assert (
            "eu_west_cluster"
            in context_compile(
                project=graph, query="where is payment_service deployed_to", max_tokens=600
            )["markdown"]
        )
        raise _Undone
    compiler_cache_clear()
    fact_upsert(
        project=graph, subject_id="payment_service", predicate="deployed_to", object_value="on_prem"
    )

    result = context_compile(
        project=graph, query="where is payment_service deployed_to", max_tokens=600
    )
    assert "eu_west_cluster" not in result["markdown"]
    assert "on_prem" in result["markdown"]
    assert stats_of(graph)["restored"] == -1


def _seen_then_rolled_back(graph) -> str:
    """A write the index takes in, then rolled back; answers the query that finds it."""
    query = "where is payment_service deployed_to"
    with pytest.raises(_Undone), transaction.atomic():
        fact_upsert(
            project=graph,
            subject_id="payment_service",
            predicate="deployed_to",
            object_value="eu_west_cluster",
        )
        assert "eu_west_cluster" in context_compile(project=graph, query=query)["markdown"]
        raise _Undone
    return query


def test_live_index_of_a_history_the_database_no_longer_holds_is_rebuilt(graph):
    """The same within one process: an index that saw writes later rolled back, then a
    different write that brings the graph back to the same revision number. The index's
    revision matches the graph's, its content does not: it must start over, not answer
    what is no longer there (nor miss what is)."""
    query = _seen_then_rolled_back(graph)
    fact_upsert(
        project=graph, subject_id="payment_service", predicate="deployed_to", object_value="on_prem"
    )

    markdown = context_compile(project=graph, query=query, max_tokens=600)["markdown"]
    assert "eu_west_cluster" not in markdown
    assert "on_prem" in markdown


def test_live_index_of_a_history_the_graph_went_on_from_after_a_rollback_is_rebuilt(graph):
    """As above, but the graph then moved past the revision the index had seen: the change log
    no longer holds the index's last change, so it starts over rather than reading on from a
    revision whose rows are not the ones it took in."""
    query = _seen_then_rolled_back(graph)
    fact_upsert(
        project=graph, subject_id="payment_service", predicate="deployed_to", object_value="on_prem"
    )
    fact_upsert(project=graph, subject_id="ledger_store", predicate="owned_by", object_value="ops")

    markdown = context_compile(project=graph, query=query, max_tokens=600)["markdown"]
    assert "eu_west_cluster" not in markdown
    assert "on_prem" in markdown


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data[:-40] + bytes(b ^ 0xFF for b in data[-40:]),  # corrupted
        lambda data: b"not a snapshot at all",
        lambda data: b"",
    ],
    ids=["truncated", "corrupted", "garbage", "empty"],
)
def test_damaged_snapshot_is_ignored_and_rebuilt(snapshots, graph, damage):
    built = _compile(graph)
    path = _file_of(graph)
    path.write_bytes(damage(path.read_bytes()))
    compiler_cache_clear()

    assert _compile(graph) == built
    stats = stats_of(graph)
    assert stats["restored"] == -1
    assert stats["rows_read"] >= 6
    # ... and a good snapshot replaces the damaged one.
    compiler_cache_clear()
    assert _compile(graph) == built
    assert stats_of(graph)["rows_read"] == 0


def test_snapshot_signed_with_another_key_is_ignored(settings, snapshots, graph):
    built = _compile(graph)
    settings.SECRET_KEY = "another deployment's secret key, long enough to be a real one"
    compiler_cache_clear()
    assert _compile(graph) == built
    assert stats_of(graph)["restored"] == -1


def test_snapshot_of_the_hmac_format_is_refused_and_rebuilt_from_the_rows(snapshots, graph):
    """A /2 snapshot (HMAC-SHA256 with the same key), left by an earlier version, is refused
    unread: the index is built from the rows and written again in the current format."""
    from graph_app.domain.snapshot_file import MAGIC
    from graph_app.snapshot import snapshot_key

    built = _compile(graph)
    path = _file_of(graph)
    body = path.read_bytes()[len(MAGIC) + 32 :]
    older = b"memoryproject-index-snapshot/2\n"
    path.write_bytes(older + hmac.digest(snapshot_key(), body, "sha256") + body)
    compiler_cache_clear()
    assert _compile(graph) == built
    assert stats_of(graph)["restored"] == -1
    assert stats_of(graph)["rows_read"] > 0
    assert path.read_bytes().startswith(MAGIC)
    rewritten = path.read_bytes()
    assert (
        rewritten[len(MAGIC) : len(MAGIC) + 32]
        == blake3(rewritten[len(MAGIC) + 32 :], key=snapshot_key()).digest()
    )


def test_damaged_snapshot_never_fails_a_request(snapshots, graph, client_for):
    _compile(graph)
    _file_of(graph).write_bytes(b"\x00" * 100)
    compiler_cache_clear()
    client = client_for("read", ("default",))
    response = client.post("/v1/graph/compile", {"query": QUERY, "max_tokens": 600}, format="json")
    assert response.status_code == 200, response.content
    assert "JWT_HS256" in response.json()["markdown"]


def test_forgetting_a_project_deletes_its_snapshot(snapshots, graph):
    _compile(graph)
    assert _file_of(graph).exists()
    compiler_cache_forget(graph.pk)
    assert not _file_of(graph).exists()


def test_unwritable_snapshot_directory_still_answers(settings, snapshots, graph, tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    settings.COMPILER_SNAPSHOT_DIR = str(blocker / "index")
    assert "JWT_HS256" in _compile(graph)["markdown"]


def test_warming_before_workers_fork_leaves_nothing_to_read(snapshots, graph):
    warmed = compiler_warm()
    assert warmed[graph.slug] == stats_of(graph)["revision"] > 0
    rows = stats_of(graph)["rows_read"]
    _compile(graph)
    assert stats_of(graph)["rows_read"] == rows


# --- a snapshot is data, never code ---------------------------------------------------------


def _pickle_that_creates(marker: Path) -> bytes:
    """A pickle that creates ``marker`` when it is loaded: what a forged snapshot would run."""

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    return pickle.dumps(Payload())


def _signed_as_before(payload: bytes, settings) -> bytes:
    """``payload`` framed and signed as snapshots were while they were pickles."""
    key = hashlib.sha256(f"compiler-snapshot:{settings.SECRET_KEY}".encode()).digest()
    mac = hashlib.blake2b(payload, key=key, digest_size=32).digest()
    return b"memoryproject-index-snapshot/1\n" + mac + payload


def _signed(body: bytes) -> bytes:
    """``body`` framed and signed (with the deployment's real key) as snapshots are now."""
    from graph_app.domain.snapshot_file import MAGIC
    from graph_app.snapshot import snapshot_key

    return MAGIC + blake3(body, key=snapshot_key()).digest() + body


def _with_header(document: dict, data: bytes) -> bytes:
    text = json.dumps(document).encode()
    body = len(text).to_bytes(8, "little") + text
    return body + b"\0" * (-(31 + 32 + len(body)) % 64) + data


@pytest.mark.parametrize(
    "forge",
    [
        lambda payload, settings: _signed_as_before(payload, settings),
        lambda payload, settings: _signed(payload),
        # a well-formed header naming an array of Python objects whose bytes are the pickle
        lambda payload, settings: _signed(
            _with_header({"header": {}, "arrays": {"state": ["|O", 1, 0]}}, payload)
        ),
    ],
    ids=["pickle-signed-as-before", "pickle-signed-with-the-key", "object-array"],
)
def test_a_signed_snapshot_holding_a_pickle_is_refused_and_never_run(
    settings, snapshots, graph, tmp_path, caplog, forge
):
    """Whoever holds SECRET_KEY (a leaked backup of the key file, say) can sign a snapshot:
    loading it must still never run what it holds."""
    built = _compile(graph)
    marker = tmp_path / "code-ran"
    _file_of(graph).write_bytes(forge(_pickle_that_creates(marker), settings))
    compiler_cache_clear()

    assert _compile(graph) == built
    assert not marker.exists(), "loading the snapshot ran code"
    assert stats_of(graph)["restored"] == -1
    assert "compiler index snapshot" in caplog.text and "ignored" in caplog.text


@pytest.mark.parametrize("where", ["signature", "header", "arrays", "last byte"])
def test_a_snapshot_with_one_byte_changed_is_ignored_and_rebuilt(snapshots, graph, where):
    built = _compile(graph)
    path = _file_of(graph)
    data = bytearray(path.read_bytes())
    at = {"signature": 40, "header": 120, "arrays": len(data) // 2, "last byte": len(data) - 1}
    data[at[where]] ^= 0x01
    path.write_bytes(bytes(data))
    compiler_cache_clear()

    assert _compile(graph) == built
    assert stats_of(graph)["restored"] == -1
    assert stats_of(graph)["rows_read"] >= 6
    compiler_cache_clear()  # the rebuilt index wrote a good snapshot in its place
    assert _compile(graph) == built
    assert stats_of(graph)["rows_read"] == 0


def test_a_loaded_snapshot_answers_every_view_as_a_fresh_build(settings, snapshots, graph):
    """History, time travel (each fact re-rendered as then known, from the times the snapshot
    kept) and the live view: the same bundles from a loaded index as from the rows."""
    fact_upsert(
        project=graph,
        subject_id="payment_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
    )
    moment = TemporalFact.objects.get(project=graph, object_value="PASETO_v4_public").recorded_at
    views: list[dict[str, object]] = [
        {},
        {"include_superseded": True},
        {"as_of": moment.isoformat()},
        {"known_at": moment.isoformat(), "include_superseded": True},
    ]

    def compiles():
        return [
            context_compile(project=graph, query=QUERY, max_tokens=600, **view)  # type: ignore[arg-type]
            for view in views
        ]

    compiles()  # writes the snapshot
    compiler_cache_clear()
    loaded = compiles()
    assert stats_of(graph)["restored"] >= 0 and stats_of(graph)["rows_read"] == 0
    settings.COMPILER_SNAPSHOT_DIR = ""
    compiler_cache_clear()
    fresh = compiles()
    assert stats_of(graph)["restored"] == -1
    assert loaded == fresh


def test_the_code_fingerprint_does_not_depend_on_what_a_process_has_imported():
    """A process that has imported none of the index's modules yet (a server right after its
    settings) signs and checks snapshots with the same fingerprint as one that has them all:
    otherwise a snapshot would be refused, and the index rebuilt from the rows, depending on
    the order a door imports its modules in."""
    bare = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; import graph_app.snapshot as s; "
            "late = [m for m in s.INDEX_MODULES if m not in sys.modules]; "
            "print(s.code_fingerprint.__wrapped__(), len(late))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "memoryproject.settings"},
        cwd=Path(__file__).resolve().parents[2],
    )
    fingerprint, late = bare.stdout.split()
    assert int(late) > 0  # the bare process had not imported some of them
    for name in snapshot_module.INDEX_MODULES:
        importlib.import_module(name)
    assert fingerprint == snapshot_module.code_fingerprint.__wrapped__()


def test_a_restored_index_previews_an_episode_without_counting_its_sentences_again(
    snapshots, default_project, monkeypatch
):
    """What a preview counts before it is built (the citation, the sentences) was counted when
    the episode was indexed and is stored with it: a new process, its caches empty, counts only
    the preview it builds, and builds the same one."""
    parts = []
    for episode in range(6):
        said = [
            f"Retry {episode}.{n} of ledger_store replays the idempotency key after {n} s."
            for n in range(8)
        ]
        episode_record(
            project=default_project,
            title=f"Incident {episode}: ledger_store retries",
            category="incident",
            content=" ".join(said),
            entities_mentioned=["ledger_store"],
        )
        parts += said

    def compiled() -> CompileResult:
        return context_compile(
            project=default_project, query="ledger_store retry idempotency", max_tokens=600
        )

    built = compiled()
    # Full lines first, then (past their share of the budget) previews.
    assert built["markdown"].count("… ") + built["markdown"].count(" …") >= 2

    compiler_cache_clear()  # a new process: the index and the caches of text empty
    text_caches_clear()
    counted: list[str] = []

    def count_tokens(text: str) -> int:
        counted.append(text)
        return tokens_module.count_tokens(text)

    monkeypatch.setattr(text_cache, "count_tokens", count_tokens)
    assert compiled() == built
    assert stats_of(default_project)["restored"] >= 0
    assert counted, "the preview itself is counted"
    assert not {count_key(text) for part in parts for text in (part, " " + part)} & set(counted)
