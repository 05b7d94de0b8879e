"""A process that builds a project's index from the rows, once it has written the snapshot,
serves the index from that snapshot's columns, as every process started since reads them: the
same answers, before and after later writes, and the built copy let go."""

from __future__ import annotations

import weakref

import pytest

from graph_app.compiler import context_compile
from graph_app.domain import semantic
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.index_cache import compiler_cache_clear, project_index
from tests.compiler.helpers import stats_of

pytestmark = pytest.mark.django_db

QUERY = "which queue does order_worker read and what does it depend on"


def _graph(project) -> None:
    for subject, value in [
        ("order_worker", "ledger_store"),
        ("order_worker", "billing_api"),
        ("billing_api", "auth_service"),
        ("mail_relay", "smtp_gateway"),  # far from every query here: no ranking reaches it
    ]:
        fact_upsert(project=project, subject_id=subject, predicate="depends_on", object_value=value)
    fact_upsert(
        project=project, subject_id="order_worker", predicate="reads_queue", object_value="orders"
    )
    episode_record(
        project=project,
        title="Incident: order_worker stalled on the orders queue",
        category="incident",
        content="order_worker stopped reading orders when billing_api timed out; retries fixed it.",
        entities_mentioned=["order_worker", "billing_api"],
    )


def _compile(project):
    return context_compile(project=project, query=QUERY, max_tokens=600)


def _graph_made(project) -> bool:
    """Whether the serving index made every entity's items when it was built or switched, not
    only those of the entities a ranking reached."""
    index = project_index(project).index
    made = set(index._node_items)
    index.graph_warm()
    return "mail_relay" in made and made == set(index._node_items)


def _built_without_snapshots(project, settings):
    """The compile of a process that builds the index and keeps it as built."""
    compiler_cache_clear()
    directory = settings.COMPILER_SNAPSHOT_DIR
    settings.COMPILER_SNAPSHOT_DIR = ""
    try:
        answer = _compile(project)
        assert stats_of(project)["mapped"] == 0
        assert _graph_made(project)
        return answer
    finally:
        settings.COMPILER_SNAPSHOT_DIR = directory
        compiler_cache_clear()


def test_a_built_index_is_served_from_the_snapshot_it_wrote(snapshots, default_project, settings):
    _graph(default_project)
    entry = project_index(default_project)
    building = weakref.ref(entry.index)

    served = _compile(default_project)

    stats = stats_of(default_project)
    assert stats["mapped"] == 1  # reads the columns of the file it wrote
    assert stats["restored"] == -1 and stats["rows_read"] >= 5  # built here, from the rows
    assert building() is None  # the built copy is gone, not kept beside the columns
    assert _graph_made(default_project)
    assert served["items"] and "orders" in served["markdown"]
    assert served == _built_without_snapshots(default_project, settings)


def test_writes_after_the_switch_are_served_as_a_build_would(snapshots, default_project, settings):
    _graph(default_project)
    _compile(default_project)
    assert stats_of(default_project)["mapped"] == 1
    fact_upsert(
        project=default_project,
        subject_id="order_worker",
        predicate="reads_queue",
        object_value="orders_v2",
    )

    served = _compile(default_project)

    assert "orders_v2" in served["markdown"]
    assert served == _built_without_snapshots(default_project, settings)


@pytest.mark.skipif(
    not semantic.available(),
    reason=f"the semantic backend is not installed (missing: {semantic.missing()})",
)
def test_the_sentence_vectors_of_the_build_are_served_with_it(snapshots, default_project, settings):
    # Vectors are not in the snapshot: the index served from it keeps those the build made, at
    # the slots the file gives the same items, so that ranking by meaning goes on at once.
    settings.MEMORY_SEMANTIC = True
    _graph(default_project)
    episode_record(
        project=default_project,
        title="Maria",
        category="session_note",
        content="We adopted a puppy from the shelter, she is so playful.",
        external_id="D1:1",
    )

    served = context_compile(
        project=default_project, query="Does she own a dog?", max_tokens=400, order="relevance"
    )

    assert stats_of(default_project)["mapped"] == 1
    index = project_index(default_project).index
    assert len(index.dense) == len(index.docs)
    assert served["items"][0]["external_id"] == "D1:1"  # no word in common with the query
