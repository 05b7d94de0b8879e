"""context_compile with the semantic backend on (MEMORY_SEMANTIC): items get sentence vectors
when indexed, the query one when compiled, and a turn in other words is found."""

from __future__ import annotations

import pytest
from django.test import override_settings

from graph_app.compiler import context_compile
from graph_app.domain import semantic
from graph_app.episode_writes import episode_record
from graph_app.index_cache import project_index

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not semantic.available(),
        reason=f"the semantic backend is not installed (missing: {semantic.missing()})",
    ),
]
TURNS = [
    "I took this picture on my trip to Spain and Portugal last summer.",
    "We adopted a puppy from the shelter, she is so playful.",
    "The parser returns a config object with the defaults filled in.",
    "My brother plays the guitar in a jazz band on weekends.",
]


def _record(project):
    for position, text in enumerate(TURNS):  # no stream: no neighbour lends relevance
        episode_record(
            project=project,
            title="Maria",
            category="session_note",
            content=text,
            external_id=f"D1:{position}",
        )


def _first(project, query):
    result = context_compile(project=project, query=query, max_tokens=400, order="relevance")
    return result["items"][0]["external_id"] if result["items"] else None


def test_off_by_default_no_vectors_are_made(default_project):
    _record(default_project)
    context_compile(project=default_project, query="dog", max_tokens=400)
    assert len(project_index(default_project).index.dense) == 0


@override_settings(MEMORY_SEMANTIC=True)
def test_on_every_item_gets_a_vector_and_a_query_in_other_words_finds_its_turn(default_project):
    _record(default_project)
    # no word in common with the turn that answers
    assert _first(default_project, "Which European countries has she been to?") == "D1:0"
    assert _first(default_project, "Does she own a dog?") == "D1:1"
    index = project_index(default_project).index
    assert len(index.dense) == len(index.docs) == len(TURNS)
    # a new item is embedded at the next refresh
    episode_record(project=default_project, title="Maria", category="session_note", content="Hi")
    context_compile(project=default_project, query="music", max_tokens=400)
    assert len(index.dense) == len(TURNS) + 1
