"""context_compile over a real graph: never stale, never over budget, replayable, fresh."""

from __future__ import annotations

import re

import pytest

from graph_app import text_cache
from graph_app.compiler import context_compile
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_retract, fact_upsert
from graph_app.index_cache import compiler_cache_clear, project_index
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import utcnow
from memoryproject.tokens import count_tokens

pytestmark = pytest.mark.django_db


def _ids(result):
    return [item["id"] for item in result["items"]]


@pytest.fixture
def tokens_graph(default_project):
    old = fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="JWT_HS256",
        valid_from="2026-01-10T00:00:00Z",
    )
    new = fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        valid_from="2026-04-20T00:00:00Z",
    )
    return old["fact"]["id"], new["fact"]["id"]


def test_superseded_fact_never_appears_and_is_counted(default_project, tokens_graph):
    _, new = tokens_graph
    result = context_compile(project=default_project, query="auth_service token format")
    assert _ids(result) == [new]
    assert "JWT_HS256" not in result["markdown"]
    assert result["suppressed_stale"] == 1


def test_include_superseded_shows_the_history_line(default_project, tokens_graph):
    old, new = tokens_graph
    result = context_compile(
        project=default_project, query="auth_service token format", include_superseded=True
    )
    assert set(_ids(result)) == {old, new}
    assert result["suppressed_stale"] == 0
    assert "valid_until=2026-04-20, superseded" in result["markdown"]


def test_fact_line_cites_id_validity_source_and_hash(default_project):
    source = episode_record(
        project=default_project,
        title="Switch to PASETO",
        category="adr",
        content="Tokens move to PASETO v4 public keys.",
    )
    fact = fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        valid_from="2026-04-20T00:00:00Z",
        source_episode=source["id"],
    )
    result = context_compile(project=default_project, query="auth_service token format")
    fact = fact["fact"]
    line = f"[FACT:{fact['id']}] «auth_service --(uses_token_format)--> PASETO_v4_public» "
    line += f"(valid_from=2026-04-20, src={source['id']}) @sha256:{fact['sha256'][:8]}"
    assert line in result["markdown"].splitlines()
    assert f"[FACT:{fact['id']}]" in result["citations"]


def test_episode_line_has_category_tag_title_files_and_content(default_project):
    episode = episode_record(
        project=default_project,
        title="Ledger balances are never negative",
        category="invariant",
        content="Every debit checks the balance inside the same transaction.",
        files_touched=["src/ledger/balance.py"],
        occurred_at="2026-03-02T10:00:00Z",
    )
    result = context_compile(project=default_project, query="ledger balance invariant")
    assert "## Episodes 2026-03-02" in result["markdown"]
    assert (
        f"[INVARIANT:{episode['id']}] «Ledger balances are never negative | files: "
        "src/ledger/balance.py | Every debit checks the balance inside the same transaction."
    ) in result["markdown"].splitlines()
    assert result["items"][0]["kind"] == "episode"


def test_as_of_compiles_what_was_true_then(default_project, tokens_graph):
    old, _ = tokens_graph
    result = context_compile(
        project=default_project, query="auth_service token format", as_of="2026-02-01T00:00:00Z"
    )
    assert _ids(result) == [old]
    assert result["as_of"] == "2026-02-01T00:00:00Z"


def test_known_at_replays_the_bundle_an_agent_received(default_project):
    fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="JWT_HS256",
        valid_from="2026-01-10T00:00:00Z",
    )
    episode_record(
        project=default_project,
        title="Token rotation",
        category="session_note",
        content="auth_service rotates token signing keys monthly.",
    )
    then = context_compile(project=default_project, query="auth_service token format")
    moment = utcnow()
    fact_upsert(
        project=default_project,
        subject_id="auth_service",
        predicate="uses_token_format",
        object_value="PASETO_v4_public",
        valid_from="2026-04-20T00:00:00Z",
    )
    episode_record(
        project=default_project,
        title="Token format change",
        category="adr",
        content="auth_service token format becomes PASETO.",
    )
    replay = context_compile(
        project=default_project, query="auth_service token format", known_at=moment
    )
    assert replay["markdown"] == then["markdown"]
    assert replay["items"] == then["items"]
    now = context_compile(project=default_project, query="auth_service token format")
    assert "PASETO_v4_public" in now["markdown"] and "JWT_HS256" not in now["markdown"]


def test_two_hop_activation_brings_in_the_dependency(default_project):
    fact_upsert(
        project=default_project,
        subject_id="order_repository",
        predicate="invariant",
        object_value="orders are immutable once paid",
        singular=False,
    )
    fact_upsert(
        project=default_project,
        subject_id="order_repository",
        predicate="depends_on",
        object_value="payment_ledger",
        object_entity="payment_ledger",
        singular=False,
    )
    guarantee = fact_upsert(
        project=default_project,
        subject_id="payment_ledger",
        predicate="guarantees",
        object_value="balance never negative",
        singular=False,
    )
    for i in range(6):
        fact_upsert(
            project=default_project,
            subject_id=f"unrelated_{i}",
            predicate="runs_on",
            object_value=f"host_{i}",
        )
    result = context_compile(project=default_project, query="order_repository invariants")
    assert guarantee["fact"]["id"] in _ids(result)
    assert not any(i.startswith("unrelated") for i in result["markdown"].split())


def test_bundle_never_exceeds_the_budget(default_project):
    for i in range(40):
        episode_record(
            project=default_project,
            title=f"Incident {i} in the checkout flow",
            category="incident",
            content=f"checkout_service timed out calling payment_gateway, attempt {i}. " * 8,
        )
    for budget in (64, 100, 333, 800):
        result = context_compile(
            project=default_project, query="checkout payment timeout", max_tokens=budget
        )
        assert result["items"]
        assert result["token_count"] == count_tokens(result["markdown"]) <= budget


def test_long_episode_is_truncated_but_still_cited(default_project):
    episode = episode_record(
        project=default_project,
        title="Outbox pattern for order events",
        category="adr",
        content="order_service publishes events through an outbox table. " * 200,
    )
    result = context_compile(project=default_project, query="order outbox events", max_tokens=200)
    assert result["items"][0]["id"] == episode["id"]
    assert result["items"][0]["truncated"] is True
    line = next(
        x for x in result["markdown"].splitlines() if x.startswith(f"[ADR:{episode['id']}]")
    )
    assert line.startswith(f"[ADR:{episode['id']}] «Outbox pattern for order events |")
    assert line.endswith("…")
    assert result["token_count"] <= 200


def test_stream_neighbour_turn_is_included(default_project):
    turns = [
        "Did you ever adopt the dog from the shelter?",
        "Yes! We named him Biscuit and he sleeps all day.",
        "The weather was lovely at the lake this weekend.",
        "We tried a new pasta recipe with lemon and basil.",
    ]
    ids = [
        episode_record(
            project=default_project,
            title="Ann" if i % 2 == 0 else "Bob",
            category="session_note",
            content=text,
            metadata={"stream": "chat-1", "position": i},
        )["id"]
        for i, text in enumerate(turns)
    ]
    result = context_compile(project=default_project, query="adopt a dog from the shelter")
    assert ids[0] in _ids(result) and ids[1] in _ids(result)


QUERIES = ["auth_service token format", "order_repository invariants", "ledger balance", "billing"]


def _writes(project):
    yield lambda: fact_upsert(
        project=project, subject_id="auth_service", predicate="uses_token_format",
        object_value="JWT_HS256", valid_from="2026-01-10T00:00:00Z",
    )  # fmt: skip
    yield lambda: episode_record(
        project=project, title="Ledger balance rule", category="invariant",
        content="payment_ledger balance never negative", files_touched=["src/ledger.py"],
    )  # fmt: skip
    yield lambda: fact_upsert(
        project=project, subject_id="order_repository", predicate="depends_on",
        object_value="payment_ledger", object_entity="payment_ledger", singular=False,
    )  # fmt: skip
    yield lambda: fact_upsert(
        project=project, subject_id="auth_service", predicate="uses_token_format",
        object_value="PASETO_v4_public", valid_from="2026-04-20T00:00:00Z",
    )  # fmt: skip
    yield lambda: fact_upsert(
        project=project, subject_id="billing_export", predicate="runs_at", object_value="02:00",
    )  # fmt: skip
    yield lambda: episode_record(
        project=project, title="Billing export moved", category="migration",
        content="billing_export now runs after the ledger close", entities_mentioned=["billing_export"],
    )  # fmt: skip


def test_cached_index_after_writes_equals_a_fresh_build(default_project):
    retract_target = None
    for step, write in enumerate(_writes(default_project)):
        answer = write()
        if step == 4:
            retract_target = answer["fact"]["id"]
        for query in QUERIES:  # keep the cache warm between writes
            context_compile(project=default_project, query=query)
    fact_retract(project=default_project, fact_id=retract_target)
    warm = [context_compile(project=default_project, query=q) for q in QUERIES]
    compiler_cache_clear()
    fresh = [context_compile(project=default_project, query=q) for q in QUERIES]
    assert warm == fresh
    assert any(r["suppressed_stale"] for r in warm)
    assert "02:00" not in "".join(r["markdown"] for r in warm)  # retracted


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_tokens": 63}, "max_tokens"),
        ({"max_tokens": 32_001}, "max_tokens"),
        ({"max_tokens": "lots"}, "max_tokens"),
        ({"query": "   "}, "query"),
        ({"as_of": "last tuesday"}, "as_of"),
        ({"as_of": "2026-02-01T00:00:00"}, "as_of"),
        ({"known_at": "2026-13-01T00:00:00Z"}, "known_at"),
        ({"include_superseded": "maybe"}, "include_superseded"),
    ],
)
def test_bad_input_is_rejected_naming_the_field(default_project, kwargs, field):
    args = {"query": "anything", **kwargs}
    with pytest.raises(ApplicationError) as error:
        context_compile(project=default_project, **args)
    assert error.value.field == field
    assert re.match(rf"{field}: ", error.value.message)


def test_episode_is_cited_by_its_short_external_id(default_project):
    adr = episode_record(
        project=default_project,
        title="Outbox for order events",
        category="adr",
        content="order_service publishes events through an outbox table.",
        external_id="ADR-0012",
    )
    result = context_compile(project=default_project, query="order events outbox")
    assert "[ADR:ADR-0012] «Outbox for order events | order_service" in result["markdown"]
    assert adr["id"] not in result["markdown"]  # the shorter id stands for it
    item = result["items"][0]
    assert (item["id"], item["external_id"], item["citation"]) == (
        adr["id"],
        "ADR-0012",
        "[ADR:ADR-0012]",
    )
    assert result["citations"] == ["[ADR:ADR-0012]"]


@pytest.mark.parametrize(
    "external_id",
    ["ep_0123456789abcdef", "FACT_x", "has space", "a]b", "x" * 25, "-starts-with-dash"],
)
def test_external_ids_that_could_mislead_are_not_cited(default_project, external_id):
    episode = episode_record(
        project=default_project,
        title="Outbox for order events",
        category="adr",
        content="order_service publishes events through an outbox table.",
        external_id=external_id,
    )
    result = context_compile(project=default_project, query="order events outbox")
    assert f"[ADR:{episode['id']}] «Outbox" in result["markdown"]
    assert result["items"][0]["external_id"] == external_id
    assert result["items"][0]["citation"] == f"[ADR:{episode['id']}]"


def _checkout_incidents(project) -> list[str]:
    """Twelve long incidents, each with one sentence about a checkout timeout: ids."""
    filler = "We also talked about the weather, the traffic and lunch plans for the week. " * 3
    return [
        episode_record(
            project=project,
            title=f"Checkout incident {i}",
            category="incident",
            content=f"{filler}The checkout_service timed out calling payment_gateway {i}. "
            + filler,
        )["id"]
        for i in range(12)
    ]


def test_lower_ranked_long_episodes_come_as_cited_previews(default_project):
    ids = _checkout_incidents(default_project)
    result = context_compile(
        project=default_project, query="checkout payment_gateway timeout", max_tokens=600
    )
    assert result["token_count"] == count_tokens(result["markdown"]) <= 600
    lines = {line.split("]")[0] + "]": line for line in result["markdown"].splitlines()[1:]}
    previews = [i for i in result["items"] if i["truncated"]]
    full = [i for i in result["items"] if not i["truncated"]]
    assert full and len(previews) >= 4
    assert len(result["items"]) > len(full) + 1  # more sources than full lines alone allow
    for item in previews:
        line = lines[item["citation"]]
        assert "timed out calling payment_gateway" in line  # the best-matching sentence
        assert "…" in line
        assert item["id"] in ids


def test_previews_count_no_citation_or_heading_at_compile_time(default_project, monkeypatch):
    """What an episode's preview is built from, its citation and its section's heading
    included, is counted when the episode is indexed: a compile tokenizes only the passages
    it chooses."""
    _checkout_incidents(default_project)
    entry = project_index(default_project)
    with entry.lock:
        entry.refresh(default_project)  # indexed, never compiled
    counted: list[str] = []

    def counting(text: str) -> int:
        counted.append(text)
        return count_tokens(text)

    monkeypatch.setattr(text_cache, "count_tokens", counting)
    result = context_compile(
        project=default_project, query="checkout payment_gateway timeout", max_tokens=600
    )
    assert any(item["truncated"] for item in result["items"])  # previews were built
    heads = [text for text in counted if text.rstrip().endswith(("|", "»"))]
    headings = [text for text in counted if text.lstrip("\n").startswith("## ")]
    assert not heads and not headings, counted


def test_a_date_in_the_query_finds_what_occurred_that_day(default_project):
    days = ["2023-10-12", "2023-10-13", "2023-11-13", "2024-10-13"]
    ids = {
        day: episode_record(
            project=default_project,
            title="Melanie",
            category="session_note",
            content=f"I showed a new painting to my friends (entry {i}).",
            occurred_at=f"{day}T15:00:00Z",
        )["id"]
        for i, day in enumerate(days)
    }
    for query in (
        "What painting did Melanie show on October 13, 2023?",
        "What painting did Melanie show on 13 October 2023?",
        "painting shown 2023-10-13",
    ):
        result = context_compile(project=default_project, query=query)
        best = max(result["items"], key=lambda i: i["score"])
        assert best["id"] == ids["2023-10-13"], query
    month = context_compile(project=default_project, query="paintings shown in November 2023")
    assert max(month["items"], key=lambda i: i["score"])["id"] == ids["2023-11-13"]
