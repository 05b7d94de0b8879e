"""The compiler's pure parts: tokenizer, BM25, spreading activation, packing, ranking."""

from __future__ import annotations

import ast
import pathlib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from graph_app.domain.activation import spread_activation, strongest
from graph_app.domain.bm25 import MATCH_TERMS_MAX, BM25Index
from graph_app.domain.memory_doc import INF, MemoryDoc
from graph_app.domain.memory_index import MemoryIndex
from graph_app.domain.memory_store import Visibility
from graph_app.domain.packing import PackItem, pack
from graph_app.domain.profiles import CODE, DIALOGUE
from graph_app.domain.render import best_passage, citable_external_id, episode_citation
from graph_app.domain.tokenize import date_terms, identifiers, tokenize, tokenize_query
from memoryproject.tokens import count_tokens, joined_tokens

DOMAIN = pathlib.Path(__file__).resolve().parents[2] / "graph_app" / "domain"
MINE = [
    "tokenize",
    "bm25",
    "activation",
    "packing",
    "memory_doc",
    "memory_store",
    "memory_index",
    "ranking_params",
    "related_terms",
    "render",
    "termvectors",
    "distill",
    "bert",
]


@pytest.mark.parametrize("name", MINE)
def test_domain_module_imports_no_framework(name):
    tree = ast.parse((DOMAIN / f"{name}.py").read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not imported & {"django", "rest_framework", "mcp"}


# --- tokenizer ------------------------------------------------------------------------------


def test_snake_case_keeps_whole_identifier_and_parts():
    assert tokenize("order_repository") == ["order_repository", "order", "repositori"]


def test_camel_case_is_split_and_kept_whole():
    tokens = tokenize("PaymentLedger HTTPServer")
    assert tokens[:3] == ["paymentledger", "payment", "ledger"]
    assert tokens[3:] == ["httpserver", "http", "server"]


def test_dotted_names_and_paths_are_split():
    assert tokenize("auth.tokens.verify") == ["auth.tokens.verify", "auth", "token", "verifi"]
    tokens = tokenize("see src/billing/ledger.py")
    assert "src/billing/ledger.py" in tokens
    assert {"bill", "ledger", "py"} <= set(tokens)


def test_stop_words_dropped_and_prose_stemmed():
    assert tokenize("What are the payments of the orders?") == ["payment", "order"]


def test_sentence_final_dot_is_not_part_of_an_identifier():
    assert tokenize("It calls auth_service.") == ["call", "auth_service", "auth", "servic"]


def test_query_drops_question_scaffolding_but_never_everything():
    drop = DIALOGUE.rank.drop
    assert tokenize_query("What kind of pottery did Melanie mention?", drop=drop) == [
        "potteri",
        "melani",
    ]
    assert tokenize_query("what kind?", drop=drop) == ["kind"]


@pytest.mark.parametrize(
    ("question", "word"),
    [
        ("how many times does payment_client retry?", "time"),
        ("what kind of cache does payment_client use?", "kind"),
        ("what is the return type of parse_config?", "type"),
    ],
)
def test_code_profile_keeps_words_the_dialogue_profile_drops(question, word):
    assert word in tokenize_query(question, drop=CODE.rank.drop)
    assert word not in tokenize_query(question, drop=DIALOGUE.rank.drop)


def test_chat_fillers_are_dropped_by_the_dialogue_profile_only():
    assert "yeah" in tokenize("yeah the deploy is ok")
    assert tokenize_query("yeah okay, the deploy?", drop=DIALOGUE.rank.drop) == ["deploy"]


def test_identifiers_lists_whole_identifiers_only():
    assert identifiers("Why does order_repository call PaymentLedger here?") == {
        "order_repository",
        "paymentledger",
    }


# --- BM25 -----------------------------------------------------------------------------------

CORPUS = [
    "order_repository writes orders to the database",
    "payment_ledger keeps balances of every account",
    "the order service sends email on every order",
    "auth_service issues PASETO tokens",
    "billing exports invoices each month",
]


def _index(texts):
    index = BM25Index()
    for i, text in enumerate(texts):
        index.upsert(f"d{i}", tokenize(text))
    return index


def test_scores_equal_rank_bm25():
    index = _index(CORPUS)
    query = tokenize("order email database")
    reference = BM25Okapi([tokenize(t) for t in CORPUS]).get_scores(query)
    ours = index.scores(query)
    assert [ours[f"d{i}"] for i in range(len(CORPUS))] == pytest.approx(list(reference))


def test_better_match_ranks_first():
    scores = _index(CORPUS).scores(tokenize("which service sends order email"))
    assert max(scores, key=scores.get) == "d2"


def test_exact_identifier_match_is_boosted():
    index = _index(["order repository notes", "order_repository invariant holds"])
    query = "order_repository"
    plain = index.dense_scores(tokenize(query))
    boosted = index.dense_scores(tokenize(query), boost_identifiers=identifiers(query))
    assert boosted[index.slot("d1")] > plain[index.slot("d1")]
    assert boosted[index.slot("d0")] == plain[index.slot("d0")]
    assert boosted[index.slot("d1")] > boosted[index.slot("d0")]


def test_incremental_updates_score_like_a_fresh_build():
    index = _index(CORPUS)
    index.upsert("d3", tokenize("auth_service issues JWT tokens for billing"))
    index.upsert("d9", tokenize("a new order email template"))
    fresh = BM25Index()
    for key, text in [
        ("d0", CORPUS[0]),
        ("d1", CORPUS[1]),
        ("d2", CORPUS[2]),
        ("d3", "auth_service issues JWT tokens for billing"),
        ("d4", CORPUS[4]),
        ("d9", "a new order email template"),
    ]:
        fresh.upsert(key, tokenize(text))
    query = tokenize("order email billing tokens")
    assert index.scores(query) == fresh.scores(query)


words = st.sampled_from(
    [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "eps",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lam",
        "mu",
        "nu",
        "xi",
    ]
)


@settings(max_examples=60)
@given(
    docs=st.lists(st.lists(words, min_size=1, max_size=8), min_size=1, max_size=25),
    query=st.lists(words | st.sampled_from(["unknown", "absent"]), min_size=1, max_size=16),
)
def test_matches_tallied_as_bit_masks_weigh_exactly_what_adding_the_weights_gives(docs, query):
    index = BM25Index()
    for i, doc in enumerate(docs):
        index.upsert(f"d{i}", doc)
    # The sum of each slot's terms' smoothed IDFs, added term by term in sorted order.
    expected = np.zeros(index.n_slots)
    for term in sorted(set(query)):
        for i, doc in enumerate(docs):
            if term in doc:
                expected[index.slot(f"d{i}")] += index.smooth_idf(term)
    table = index.match_table(query)
    known = {t for t in query if index.document_frequency(t)}
    assert (table is None) == (len(known) > MATCH_TERMS_MAX)
    assert np.array_equal(index.matched_weight(query), expected)  # equal floats, not close
    if table is not None:
        mask, _ = table
        assert np.array_equal(mask != 0, expected > 0)


@settings(max_examples=60)
@given(
    docs=st.lists(st.lists(words, min_size=1, max_size=8), min_size=1, max_size=25),
    weighted=st.lists(
        st.tuples(words | st.just("absent"), st.floats(0.01, 1.0)), min_size=1, max_size=8
    ),
    b=st.sampled_from([None, 0.5]),
    cached=st.booleans(),
    step=st.integers(1, 3),
)
def test_weighted_scores_are_each_terms_scores_weighted_and_added_in_order(
    docs, weighted, b, cached, step
):
    index = BM25Index()
    for i, doc in enumerate(docs):
        index.upsert(f"d{i}", doc)
    if cached:  # a term's contribution kept by an earlier query's ranking
        index.dense_scores([t for t, _ in weighted], b=b)
    # Some of the documents (a ranking's pool), in no particular order.
    slots = np.array([index.slot(f"d{i}") for i in range(len(docs))][::-step])
    # Each term's BM25 score of every slot, weighted and added to the sum term by term.
    expected = np.zeros(len(slots))
    for term, weight in weighted:
        expected += weight * index.dense_scores([term], b=b)[slots]
    assert np.array_equal(index.weighted_scores(weighted, slots, b=b), expected)
    # Either way of working it out (chosen by the corpus's size against the slots').
    at, b_used = slots.astype(np.intp), index.b if b is None else b
    assert np.array_equal(index._searched_scores(weighted, at, b_used), expected)
    assert np.array_equal(index._scattered_scores(weighted, at, b_used), expected)


# --- activation -----------------------------------------------------------------------------

EDGES = {
    "order_repository": ["payment_ledger"],
    "payment_ledger": ["order_repository", "currency_rates"],
    "currency_rates": ["payment_ledger", "fx_feed"],
    "fx_feed": ["currency_rates"],
}


def test_activation_reaches_two_hops_with_decay_and_no_further():
    act = spread_activation({"order_repository": 1.0}, lambda n: EDGES.get(n, []), decay=0.5)
    assert act["order_repository"] == 1.0
    assert act["payment_ledger"] == pytest.approx(0.5)
    assert act["currency_rates"] == pytest.approx(0.25)
    assert "fx_feed" not in act


def test_activation_keeps_the_strongest_path():
    act = spread_activation(
        {"order_repository": 1.0, "currency_rates": 0.2}, lambda n: EDGES.get(n, []), decay=0.5
    )
    assert act["payment_ledger"] == pytest.approx(0.5)


@settings(max_examples=100)
@given(
    values=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3), st.sampled_from([0.1, 0.25, 0.5, 1.0])
    ),
    limit=st.none() | st.integers(0, 12),
)
def test_strongest_is_by_value_then_by_name_cut_at_its_limit(values, limit):
    expected = sorted(values.items(), key=lambda pair: (-pair[1], pair[0]))
    assert strongest(values.items(), limit) == expected[:limit]


def test_ranking_surfaces_facts_of_a_dependency_the_query_does_not_name():
    index = MemoryIndex()

    def fact(key, subject, text, obj=None):
        index.upsert(
            MemoryDoc(
                key=key,
                kind="fact",
                tokens=tuple(tokenize(text)),
                entities=(subject,) + ((obj,) if obj else ()),
                subject=subject,
                edge=(subject, obj) if obj else None,
            )
        )

    fact("fact:1", "order_repository", "order_repository invariant orders are immutable")
    fact(
        "fact:2", "order_repository", "order_repository depends_on payment_ledger", "payment_ledger"
    )
    fact("fact:3", "payment_ledger", "payment_ledger balance never negative")
    fact("fact:4", "billing_export", "billing_export runs nightly at 02:00")
    ranked = dict(index.rank("order_repository invariants", Visibility()).ranked)
    assert "fact:3" in ranked  # reached through the depends_on edge
    assert "fact:4" not in ranked
    assert ranked["fact:1"] > ranked["fact:3"]


def test_activation_follows_the_graph_as_it_is_at_each_ranking():
    """One index answers ranking after ranking: an edge written, closed or hidden by a time
    travel between two of them is followed, or not, by the next."""
    index = MemoryIndex()

    def fact(key, subject, text, obj=None, **extra):
        edge = (subject, obj) if obj else None
        tokens = tuple(tokenize(text))
        index.upsert(MemoryDoc(key, "fact", tokens, subject=subject, edge=edge, **extra))

    fact("fact:1", "order_repository", "order_repository invariant orders are immutable")
    fact("fact:3", "payment_ledger", "payment_ledger balance never negative")
    fact("fact:4", "refund_queue", "refund_queue drains hourly")
    fact("fact:6", "audit_trail", "audit_trail keeps every change")
    query = "order_repository invariants"
    assert "fact:3" not in dict(index.rank(query, Visibility()).ranked)
    fact("fact:2", "order_repository", "order_repository uses payment_ledger", "payment_ledger")
    assert "fact:3" in dict(index.rank(query, Visibility()).ranked)
    # The edge closed and another written: activation now reaches the queue, not the ledger.
    uses = ("fact:2", "order_repository", "order_repository uses payment_ledger")
    fact(*uses, "payment_ledger", valid_until=10.0, closed_at=10.0)
    feeds = ("fact:5", "order_repository", "order_repository feeds")
    fact(*feeds, "refund_queue", valid_from=10.0, recorded_at=10.0)
    now = dict(index.rank(query, Visibility()).ranked)
    assert "fact:4" in now and "fact:3" not in now
    # Back to before the change, then forward again, on the same index.
    before = dict(index.rank(query, Visibility(as_of=5.0, known_at=5.0)).ranked)
    assert "fact:3" in before and "fact:4" not in before
    assert dict(index.rank(query, Visibility()).ranked) == now
    # An item rewritten in place (its slot and what the visibility shows unchanged).
    fact(*feeds, "audit_trail", valid_from=10.0, recorded_at=10.0)
    rewritten = dict(index.rank(query, Visibility()).ranked)
    assert "fact:6" in rewritten and "fact:4" not in rewritten


def test_the_live_view_moves_with_the_clock_between_rankings():
    """Nothing written between two rankings: a fact scheduled to start or to end in between is
    shown, or hidden and counted as stale, by the later one."""
    index = MemoryIndex()
    for key, text, start, until in [
        ("fact:old", "auth token JWT_HS256", 0.0, 100.0),
        ("fact:new", "auth token PASETO", 100.0, INF),
        ("fact:other", "auth token rotation weekly", 0.0, INF),
    ]:
        tokens = tuple(tokenize(text))
        index.upsert(MemoryDoc(key, "fact", tokens, valid_from=start, valid_until=until))
    seen = []
    for now in (50.0, 99.0, 100.0, 150.0, 50.0):
        ranking = index.rank("auth token", Visibility(now=now))
        seen.append(({k for k, _ in ranking.ranked}, ranking.suppressed_stale))
    before = ({"fact:old", "fact:other"}, 0)
    after = ({"fact:new", "fact:other"}, 1)
    assert seen == [before, before, after, after, before]


def test_superseded_fact_is_hidden_and_counted():
    index = MemoryIndex()
    index.upsert(
        MemoryDoc(
            key="fact:old",
            kind="fact",
            tokens=tuple(tokenize("auth token JWT_HS256")),
            valid_until=10.0,
            closed_at=10.0,
        )
    )
    index.upsert(
        MemoryDoc(key="fact:new", kind="fact", tokens=tuple(tokenize("auth token PASETO")))
    )
    live = index.rank("auth token", Visibility())
    assert [k for k, _ in live.ranked] == ["fact:new"]
    assert live.suppressed_stale == 1
    history = index.rank("auth token", Visibility(include_superseded=True))
    assert {k for k, _ in history.ranked} == {"fact:old", "fact:new"}


def test_stream_neighbours_lend_relevance():
    index = MemoryIndex()
    texts = ["did you adopt the dog?", "yes, we named him Biscuit", "the weather is nice"]
    for pos, text in enumerate(texts):
        index.upsert(
            MemoryDoc(
                key=f"episode:{pos}",
                kind="episode",
                tokens=tuple(tokenize(text)),
                stream="chat",
                position=pos,
            )
        )
    ranked = dict(index.rank("adopt dog", Visibility()).ranked)
    assert ranked["episode:0"] > ranked["episode:1"] > 0


def test_a_turn_written_after_a_ranking_is_lent_to_by_the_next():
    index = MemoryIndex()

    def turn(position, text):
        tokens = tuple(tokenize(text))
        doc = MemoryDoc(f"episode:{position}", "episode", tokens, stream="chat", position=position)
        index.upsert(doc)

    turn(0, "did you adopt the dog?")
    turn(5, "the weather is nice")
    assert set(dict(index.rank("adopt dog", Visibility()).ranked)) == {"episode:0"}
    # The answer arrives after that ranking, right after the question, then the one after it.
    turn(1, "yes, we named him Biscuit")
    turn(2, "he sleeps a lot")
    ranked = dict(index.rank("adopt dog", Visibility()).ranked)
    assert ranked["episode:0"] > ranked["episode:1"] > ranked["episode:2"] > 0
    assert "episode:5" not in ranked
    # Moved out of the question's neighbourhood, a turn is lent to no more.
    index.upsert(MemoryDoc("episode:1", "episode", ("yes",), stream="chat", position=9))
    assert "episode:1" not in dict(index.rank("adopt dog", Visibility()).ranked)


def _turn(key, speaker, text, position=0):
    return MemoryDoc(
        key=key,
        kind="episode",
        tokens=tuple(tokenize(f"{speaker} {text}")),
        title_terms=tuple(tokenize(speaker)),
        stream="chat",
        position=position,
    )


def _chat_index():
    index = MemoryIndex()
    # Caroline's turn praises Melanie's pottery; Melanie's own turn says what she does.
    index.upsert(_turn("episode:0", "Caroline", "Melanie, your pottery is lovely pottery!", 0))
    index.upsert(_turn("episode:1", "Melanie", "I signed up for a class: pottery, on Tuesdays.", 7))
    for i in range(2, 12):  # the rest of the conversation, away from those two turns
        index.upsert(_turn(f"episode:{i}", ("Caroline", "Melanie")[i % 2], f"weather {i}", 20 + i))
    return index


def test_dialogue_profile_prefers_the_turns_of_the_speaker_the_question_names():
    question = "What does Melanie do with pottery?"
    # Without feedback terms and neighbours, so that only the speaker prior differs.
    prior = replace(DIALOGUE.rank, prf_weight=0.0, stream_weight=0.0)
    words_only = replace(prior, title_prior=0.0)
    plain = dict(_chat_index().rank(question, Visibility(), words_only).ranked)
    dialogue = dict(_chat_index().rank(question, Visibility(), prior).ranked)
    # Caroline's turn says both words more often: by words alone it comes first.
    assert plain["episode:0"] > plain["episode:1"]
    # Asked about Melanie, what Melanie said comes first.
    assert dialogue["episode:1"] > dialogue["episode:0"]


def test_title_prior_needs_a_named_title_and_forgets_removed_titles():
    index = _chat_index()
    words_only = replace(DIALOGUE.rank, title_prior=0.0)

    def same(query):
        return (
            index.rank(query, Visibility(), DIALOGUE.rank).ranked
            == index.rank(query, Visibility(), words_only).ranked
        )

    assert same("pottery")  # no speaker named: nothing is lowered
    assert same("Caroline and Melanie pottery")  # every speaker named: none is preferred
    assert not same("Caroline pottery")
    # Once every turn titled Caroline is replaced, "caroline" names no title any more.
    for i in range(0, 12, 2):
        index.upsert(_turn(f"episode:{i}", "Someone", f"pottery notes {i}", i))
    assert same("Caroline pottery")


@pytest.mark.parametrize("b", [0.0, 0.5, 0.75, 1.0])
def test_length_normalisation_of_a_query_equals_rank_bm25_with_that_b(b):
    index = _index(CORPUS)
    query = tokenize("order email database")
    reference = BM25Okapi([tokenize(t) for t in CORPUS], b=b).get_scores(query)
    dense = index.dense_scores(query, b=b)
    assert [dense[index.slot(f"d{i}")] for i in range(len(CORPUS))] == pytest.approx(
        list(reference)
    )
    # The index's own normalisation is untouched by a query that asked for another.
    assert index.scores(query) == pytest.approx(_index(CORPUS).scores(query))


def test_ties_are_broken_by_the_whole_key_past_the_first_columns():
    # More documents than the index's first column size (64), all equally relevant: the ten
    # kept are the first ten by key, whatever order they were stored in.
    index = MemoryIndex()
    keys = [f"episode:{i:03d}" for i in range(150)]
    for key in reversed(keys):
        index.upsert(MemoryDoc(key=key, kind="episode", tokens=tuple(tokenize("ledger entries"))))
    ten = replace(CODE.rank, pool=10, candidates=10, stream_weight=0.0)
    assert [k for k, _ in index.rank("ledger entries", Visibility(), ten).ranked] == keys[:10]


@settings(max_examples=80)
@given(
    values=st.lists(st.sampled_from([0.1, 0.25, 0.5, 0.75, 1.0]), min_size=1, max_size=60),
    seed=st.randoms(use_true_random=False),
)
def test_ranked_slots_follow_the_value_then_the_key_whatever_the_storage_order(values, seed):
    index = MemoryIndex()
    keys = [f"episode:{i:03d}" for i in range(len(values))]
    stored = list(keys)
    seed.shuffle(stored)
    for key in stored:
        index.upsert(MemoryDoc(key=key, kind="episode", tokens=("x",)))
    value_of = dict(zip(keys, values, strict=True))
    asked = list(stored)  # the slots are asked about in an order of their own
    seed.shuffle(asked)
    slots = np.array([index.bm25.slot(k) for k in asked])
    first = seed.randint(1, len(keys))
    at = index._ordered(slots, np.array([value_of[k] for k in asked]), first)
    expected = sorted(keys, key=lambda k: (-value_of[k], k))[:first]
    assert [index.bm25.key(int(slots[p])) for p in at] == expected


# --- packing --------------------------------------------------------------------------------


def test_packing_prefers_utility_density():
    items = [
        PackItem(key="long", text="x " * 200, utility=1.0),
        PackItem(key="a", text="short relevant line", utility=0.6),
        PackItem(key="b", text="another short line", utility=0.5),
    ]
    packed = pack(items, max_tokens=64, count=count_tokens)
    assert {p.key for p in packed.items} == {"a", "b"}


def test_packing_counts_the_bundle_from_its_lines_with_count_lines():
    items = [
        PackItem(key="a", text="short relevant line.", utility=0.6),
        PackItem(key="b", text="another short line", utility=0.5),
    ]
    parts: list[str] = []
    joined: list[tuple[list[str], list[int]]] = []

    def count(text: str) -> int:
        parts.append(text)
        return count_tokens(text)

    def count_lines(lines, counts) -> int:
        joined.append((list(lines), list(counts)))
        return joined_tokens(lines, counts)

    packed = pack(items, max_tokens=64, count=count, count_lines=count_lines)
    lines, counts = joined[-1]
    assert "\n".join(lines) == packed.markdown
    assert counts == [count_tokens(line) for line in lines]
    assert packed.token_count == count_tokens(packed.markdown)
    assert packed.markdown not in parts  # a cache behind ``count`` never holds a bundle


def test_long_item_is_truncated_but_keeps_its_citation():
    text = "[ADR:ep_1] Big decision | " + "word " * 400
    item = PackItem(
        key="adr", text=text, utility=1.0, keep=len("[ADR:ep_1] Big decision | "), truncatable=True
    )
    packed = pack([item], max_tokens=100, count=count_tokens)
    assert packed.items and packed.items[0].truncated
    assert packed.items[0].text.startswith("[ADR:ep_1] Big decision | word")
    assert packed.token_count <= 100


line_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=300
)


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(
        st.tuples(
            line_text,
            st.floats(min_value=0.0, max_value=10.0),
            st.booleans(),
            st.sampled_from(["", "Facts", "Episodes 2026-01-01"]),
        ),
        max_size=25,
    ),
    budget=st.integers(min_value=1, max_value=600),
    use_preview=st.booleans(),
    from_lines=st.booleans(),
)
def test_packing_never_exceeds_the_budget(items, budget, use_preview, from_lines):
    candidates = [
        PackItem(
            key=f"k{i}",
            text=text,
            utility=utility,
            truncatable=cut,
            section=section,
            keep=min(5, len(text)),
            previewable=cut,
        )
        for i, (text, utility, cut, section) in enumerate(items)
    ]

    def preview(item):
        return replace(item, text=item.text[: len(item.text) // 3])

    packed = pack(
        candidates,
        max_tokens=budget,
        count=count_tokens,
        preview=preview if use_preview else None,
        full_share=0.3,
        count_lines=joined_tokens if from_lines else None,
    )
    assert packed.token_count == count_tokens(packed.markdown)
    assert packed.token_count <= budget


def test_packing_shows_items_past_the_full_share_as_previews():
    items = [
        PackItem(
            key=f"k{i}",
            text=f"[NOTE:{i}] " + "long words here " * 20,
            utility=1.0 - i / 100,
            previewable=True,
        )
        for i in range(10)
    ]

    def preview(item):
        return replace(item, text=item.text.split("]")[0] + "] gist")

    plain = pack(items, max_tokens=300, count=count_tokens)
    packed = pack(items, max_tokens=300, count=count_tokens, preview=preview, full_share=0.5)
    assert len(packed.items) > len(plain.items)
    assert not packed.items[0].truncated  # the best keeps its full text
    assert any(p.truncated and p.text.endswith("] gist") for p in packed.items)
    assert packed.token_count <= 300


# --- previews and citations -----------------------------------------------------------------


def _weights(query):
    return dict.fromkeys(tokenize(query), 1.0)


def test_best_passage_is_the_best_matching_sentence_marked_as_cut():
    content = (
        "Thanks for asking, it was a long week. "
        "We finally adopted a dog from the shelter downtown. "
        "Anyway, how is work going for you these days?"
    )
    passage = best_passage(
        content, _weights("adopt dog shelter"), tokenize=tokenize, count=count_tokens, max_tokens=14
    )
    assert passage == "… We finally adopted a dog from the shelter downtown. …"


def test_best_passage_grows_with_neighbouring_sentences_while_it_fits():
    content = "One. The dog sleeps all day. Two. " + "Filler sentence with many words. " * 6
    passage = best_passage(
        content, _weights("dog sleeps"), tokenize=tokenize, count=count_tokens, max_tokens=12
    )
    assert passage is not None and "The dog sleeps all day. Two." in passage
    assert count_tokens(passage.replace("…", "").strip()) <= 12


def test_best_passage_is_none_when_the_content_already_fits():
    assert best_passage("Short.", {}, tokenize=tokenize, count=count_tokens, max_tokens=10) is None


def test_a_long_sentence_is_cut_to_a_window_around_its_best_word():
    content = (
        "Hi there. Last summer, after a very long and tiring week at the office downtown, "
        "we finally adopted a lovely puppy from the shelter near the old train station, "
        "and she has been sleeping on the sofa ever since then."
    )
    passage = best_passage(
        content, _weights("puppy shelter"), tokenize=tokenize, count=count_tokens, max_tokens=12
    )
    assert passage is not None
    assert passage.startswith("… ") and passage.endswith(" …")
    assert "puppy from the shelter" in passage
    assert count_tokens(passage[2:-2]) <= 12


def test_unmatched_content_previews_its_opening():
    content = "First thing said. Second thing said. " + "More. " * 30
    passage = best_passage(
        content, _weights("zebra"), tokenize=tokenize, count=count_tokens, max_tokens=8
    )
    assert passage is not None and passage.startswith("First thing said.")


@pytest.mark.parametrize(
    ("external_id", "citable"),
    [
        ("ADR-0012", True),
        ("INC-431", True),
        ("D3:12", True),
        ("docs/adr/7", True),
        (None, False),
        ("", False),
        ("ep_0123456789abcdef", False),
        ("Fact_1", False),
        ("two words", False),
        ("x]y", False),
        ("x" * 25, False),
        ("#1", False),
    ],
)
def test_only_short_plain_external_ids_are_citable(external_id, citable):
    assert citable_external_id(external_id) == (external_id if citable else None)
    expected = external_id if citable else "ep_1"
    assert episode_citation("ep_1", "adr", external_id) == f"[ADR:{expected}]"


# --- dates ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("What did Nate make on 9 November, 2022?", ["2022-11-09", "2022-11"]),
        ("the painting shown on October 13, 2023", ["2023-10-13", "2023-10"]),
        ("on the 3rd of June 2023", ["2023-06-03", "2023-06"]),
        ("deployed 2026-04-20 at noon", ["2026-04-20", "2026-04"]),
        ("a workout class in December 2023", ["2023-12"]),
        ("Sept. 2024 release", ["2024-09"]),
        ("in May", []),
        ("on 31 February, 2023", ["2023-02"]),  # no such day; the month stands
        ("room 2023-13-01", []),
    ],
)
def test_dates_named_in_text_become_iso_terms(text, terms):
    assert date_terms(text) == terms


def test_query_dates_join_the_query_terms_once():
    assert tokenize_query("What happened on 9 November, 2022?")[-2:] == ["2022-11-09", "2022-11"]
    assert tokenize_query("deploy 2026-04-20").count("2026-04-20") == 1


def test_dates_do_not_depend_on_the_process_locale(tmp_path):
    """Under a German LC_TIME, strftime("%B") says "März": the index and the query reader
    must still say and read "March"."""
    import shutil
    import subprocess
    import sys

    if shutil.which("localedef") is None:
        pytest.skip("localedef is not installed: no second locale to run under")
    built = subprocess.run(
        ["localedef", "-i", "de_DE", "-f", "UTF-8", str(tmp_path / "de_DE.UTF-8")],
        capture_output=True,
    )
    if built.returncode not in (0, 1) or not (tmp_path / "de_DE.UTF-8").exists():
        pytest.skip(f"could not build the de_DE locale: {built.stderr.decode()[:200]}")
    script = (
        "import locale, datetime as d\n"
        "locale.setlocale(locale.LC_TIME, '')\n"
        "from graph_app.domain.render import episode_text\n"
        "from graph_app.domain.tokenize import date_terms\n"
        "at = d.datetime(2026, 3, 1, tzinfo=d.UTC)\n"
        "print(at.strftime('%B'))\n"
        "print(episode_text(category='adr', title='t', content='c', files=[], occurred_at=at))\n"
        "print(date_terms('deployed on 1 March 2026'))\n"
    )
    env = {"LOCPATH": str(tmp_path), "LC_ALL": "de_DE.UTF-8", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=pathlib.Path(__file__).resolve().parents[2],
        check=True,
    ).stdout.splitlines()
    assert out[0] == "März"  # the locale really is German in that process
    assert out[1].endswith("March 2026")
    assert out[2] == "['2026-03-01', '2026-03']"


def test_cross_validation_scores_each_group_with_a_setting_chosen_on_the_others():
    from benchmarks.locomo.crossval import leave_one_out

    # "a" wins on c1 and c2 by a little, "b" wins big on c3 alone: in-sample picks "b", but
    # held-out c3 is scored with "a" (chosen on c1+c2), which is what generalising costs.
    scores = {
        "a": {"c1": (8, 10), "c2": (8, 10), "c3": (5, 10)},
        "b": {"c1": (7, 10), "c2": (7, 10), "c3": (10, 10)},
    }
    cv = leave_one_out(scores)
    assert cv.best == "b" and cv.in_sample == pytest.approx(24 / 30)
    chosen = {f.held_out: f.chosen for f in cv.folds}
    assert chosen == {"c1": "b", "c2": "b", "c3": "a"}
    assert cv.cross_validated == pytest.approx((7 + 7 + 5) / 30)


def test_since_date_reads_the_day_a_query_looks_from():
    from datetime import date

    from graph_app.domain.tokenize import since_date

    assert since_date("what changed in billing_worker since 2026-03-01?") == date(2026, 3, 1)
    assert since_date("deploys after 1 March 2026") == date(2026, 3, 1)
    assert since_date("anything new since April 2026") == date(2026, 4, 1)
    assert since_date("what changed on 2026-03-01") is None


def _notes_index(texts):
    index = MemoryIndex()
    for i, text in enumerate(texts):
        index.upsert(MemoryDoc(key=f"episode:{i}", kind="episode", tokens=tuple(tokenize(text))))
    return index


@pytest.mark.parametrize("profile", [CODE, DIALOGUE], ids=lambda p: p.name)
def test_a_derived_form_of_a_known_word_finds_it(profile):
    index = _notes_index(
        ["we trekked across the Himalaya in May", "the entrepreneur pitched twice", "lunch"]
    )
    ranking = index.rank("Himalayan trip", Visibility(), profile.rank)
    assert ranking.ranked[0][0] == "episode:0"
    # The ranking says which terms it used, so that previews weigh the same ones.
    assert "himalaya" in ranking.terms and "himalayan" not in ranking.terms
    found = index.rank("entrepreneurial plans", Visibility(), profile.rank).ranked
    assert found[0][0] == "episode:1"
    # Off (and related terms off, which relate "trip" to "trekked"), the unknown words match
    # nothing.
    off = replace(profile.rank, derived_min=0, related_weight=0.0)
    assert index.rank("Himalayan trip", Visibility(), off).ranked == []


def test_a_known_word_and_a_short_stem_are_never_read_as_another():
    index = _notes_index(["the musicians rehearsed", "music all night", "a cat slept"])
    # "musicians" is known: it finds the musicians, not every mention of music.
    assert [k for k, _ in index.rank("musicians", Visibility()).ranked] == ["episode:0"]
    # "catalogue" does not become "cat": a stem shorter than five letters is too loose.
    assert index.rank("catalogue", Visibility()).ranked == []


# --- related terms --------------------------------------------------------------------------


def _trip_index():
    return _notes_index(
        [
            "Last year I took a solo trip and took this pic in Spain.",
            "The castle tour in England was magical.",
            "We cooked pasta at home tonight.",
            "The weather stayed grey all week.",
        ]
    )


def test_the_dialogue_profile_finds_an_answer_in_other_words():
    question = "What European countries has she been to?"
    index = _trip_index()
    ranking = index.rank(question, Visibility(), DIALOGUE.rank)
    found = [key for key, _ in ranking.ranked]
    # Neither turn says "European" or "country": the shipped vectors relate the words.
    assert set(found[:2]) == {"episode:0", "episode:1"}
    assert {"spain", "england"} <= {term for term, _ in ranking.related}
    # Off, nothing matches the question's words.
    off = replace(DIALOGUE.rank, related_weight=0.0)
    assert index.rank(question, Visibility(), off).ranked == []
    # The code profile keeps to the words an agent wrote.
    assert index.rank(question, Visibility(), CODE.rank).ranked == []


def test_related_terms_never_stand_for_times_numbers_or_names():
    index = _notes_index(
        [
            "It was the fourth time this month.",
            "Caroline brought snacks.",
            "Melanie painted the fence.",
            *(f"weather {i}" for i in range(3, 8)),
        ]
    )
    for i in range(8, 14):
        index.upsert(
            MemoryDoc(
                key=f"episode:{i}",
                kind="episode",
                tokens=tuple(tokenize(f"John notes {i}")),
                title_terms=tuple(tokenize("John")),
            )
        )
    index.upsert(
        MemoryDoc(key="episode:14", kind="episode", tokens=tuple(tokenize("Johnny fixed it")))
    )
    rank = DIALOGUE.rank
    # "third" and "year" are near "fourth" and "month", but another count or time is another
    # answer, not another wording.
    assert index.rank("the third year", Visibility(), rank).ranked == []
    # "john" is near "johnny", but a speaker's name is nobody else's.
    related = dict(index.rank("What did John write?", Visibility(), rank).related)
    assert "johnni" not in related


def test_shipped_term_vectors_relate_meanings_and_are_unit_length():
    from graph_app.domain.termvectors import term_vectors

    table = term_vectors()
    assert len(table) > 10_000 and table.dim == 256
    norms = np.linalg.norm(table.vectors, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-2)
    near_puppy = [term for term, _ in table.near("puppi")[:5]]
    assert "dog" in near_puppy
    assert table.similarity("puppi", "dog") > table.similarity("puppi", "invoic") + 0.3
    # Irregular forms the stemmer keeps apart read as one another.
    assert table.similarity("went", "go") > 0.6
    assert table.similarity("took", "take") > 0.6


def test_neighbours_among_a_corpus_rows_are_those_filtered_from_the_whole_table():
    """Looked up over a corpus's own rows (fewer), a term's neighbours are the very ones, with
    the very similarities, that the whole table's lookup gives once filtered to the corpus;
    whether the term was looked up in the whole table before or not."""
    from graph_app.domain.termvectors import TermVectors, term_vectors

    shipped = term_vectors()
    corpus = set(shipped.terms[::7]) | {"dog", "spain", "england", "pup", "go"}
    queries = ["puppi", "countri", "went", "invoic", "zzz-unknown", *shipped.terms[3::97][:60]]

    def lookups(table: TermVectors, among=None) -> list[list[tuple[str, float]]]:
        return [
            table.neighbours(
                term, known=corpus.__contains__, min_similarity=0.45, limit=5, among=among
            )
            for term in queries
        ]

    fresh = TermVectors(shipped.terms, shipped.vectors)
    among = fresh.corpus_rows(corpus)
    cold = lookups(fresh, among)  # nothing cached: computed over the corpus's rows
    whole = lookups(fresh)  # the whole table, now cached per term
    warm = lookups(fresh, fresh.corpus_rows(corpus))  # from that cache, filtered
    again = lookups(fresh, among)  # kept with the corpus's rows since the first lookup
    assert cold == whole == warm == again
    assert set(among.near) == {term for term in queries if term in fresh}
    assert "dog" in [term for term, _ in cold[0]]  # puppi
