"""The reference retrievers of ``locomo_eval --reference`` (benchmarks/locomo/reference.py): BM25,
dense MiniLM and their reciprocal-rank fusion, packed greedily from the compiler's own lines."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command

from benchmarks.locomo.conversations import conversation_drop, conversation_ingest
from benchmarks.locomo.reference import (
    REFERENCES,
    References,
    conversation_lines,
    pack_lines,
    reciprocal_rank_fusion,
    reference_missing,
    reference_table,
    words,
)
from memoryproject.tokens import count_tokens

LOCOMO = Path(
    os.environ.get("LOCOMO_DATA")
    or Path(settings.BASE_DIR).parent / "shared" / "datasets" / "locomo"
)
_MARKS = (
    pytest.mark.skipif(
        not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO} (it is not shipped)"
    ),
    pytest.mark.skipif(
        bool(reference_missing()), reason=f"the references need: {reference_missing()}"
    ),
    pytest.mark.django_db,
)


def needs_data_and_model(func):
    for mark in _MARKS:
        func = mark(func)
    return func


BUDGET = 800


def test_bm25_words_are_lower_cased_alphanumeric_runs():
    assert words("Caroline: I went to the LGBTQ+ group on 8 May!") == [
        "caroline",
        "i",
        "went",
        "to",
        "the",
        "lgbtq",
        "group",
        "on",
        "8",
        "may",
    ]


def test_reciprocal_rank_fusion_sums_the_reciprocal_ranks():
    first = np.array([0, 1, 2, 3])
    second = np.array([3, 2, 0, 1])
    # 0: 1/61 + 1/63, 1: 1/62 + 1/64, 2: 1/63 + 1/62, 3: 1/64 + 1/61
    assert reciprocal_rank_fusion([first, second]).tolist() == [0, 3, 2, 1]
    # a tie keeps conversation order
    assert reciprocal_rank_fusion([np.array([0, 1]), np.array([1, 0])]).tolist() == [0, 1]


def test_packing_takes_whole_lines_best_first_and_skips_what_does_not_fit():
    lines = ["[N:1] short", "[N:2] " + "long " * 50, "[N:3] also short"]
    tokens = [count_tokens(line) for line in lines]
    chosen = pack_lines([1, 0, 2], lines, tokens, budget=tokens[0] + tokens[2] + 1)
    assert chosen == [0, 2]
    assert count_tokens("\n".join(lines[i] for i in chosen)) <= tokens[0] + tokens[2] + 1
    assert pack_lines([0], lines, tokens, budget=tokens[0] - 1) == []


@needs_data_and_model
def test_every_reference_delivers_whole_turn_lines_within_the_budget():
    project, external, questions, _texts = conversation_ingest(
        LOCOMO / "conv-30.json", disable=True
    )
    try:
        turns = conversation_lines(project)
        assert len(turns.lines) == len(external) and set(turns.ids) == set(external)
        # the compiler's own lines, each citing its turn by dia_id
        assert all(
            line.startswith(f"[NOTE:{external[i]}]")
            for i, line in zip(turns.ids, turns.lines, strict=True)
        )
        references = References(turns)
        whole = set(turns.lines)
        for qa in questions[:20]:
            for name in REFERENCES:
                order = references.order(name, qa["question"])
                assert sorted(order.tolist()) == list(range(len(turns.lines)))
                result, ms = references.answer(name, qa["question"], BUDGET)
                assert ms > 0 and result == references.delivered(order, BUDGET)
                delivered = result["markdown"].split("\n")
                assert result["markdown"] and set(delivered) <= whole
                assert len(delivered) == len(set(delivered)) == len(result["items"])
                assert count_tokens(result["markdown"]) <= BUDGET
                # greedy best first: the best-ranked line always fits an 800-token budget
                assert delivered[0] == turns.lines[order[0]]
    finally:
        conversation_drop(project)


@needs_data_and_model
def test_locomo_eval_reports_the_references_beside_the_compiler():
    args = ("locomo_eval", "--data", str(LOCOMO), "--conversations", "conv-30", "--reference")
    out = io.StringIO()
    call_command(*args, "--json", stdout=out, stderr=io.StringIO())
    report = json.loads(out.getvalue())
    assert set(report["references"]) == set(REFERENCES)
    ours = report["overall"]
    for name in REFERENCES:
        row = report["references"][name]["overall"]
        assert row["questions"] == ours["questions"]
        assert 0 < row["tokens_mean"] <= BUDGET and row["tokens_p50"] <= BUDGET
        # whole lines only: a cited turn is read whole
        assert row["full_all"] == row["recall_all"] and row["previews_mean"] == 0.0
        assert 0.0 <= row["answer_contained"] <= 1.0
    hybrid = report["references"]["hybrid"]["overall"]
    margin = report["margin_vs_hybrid"]
    assert margin["full_all"] == pytest.approx(ours["full_all"] - hybrid["full_all"], abs=1e-4)
    assert margin["answer_contained"] == pytest.approx(
        ours["answer_contained"] - hybrid["answer_contained"], abs=1e-4
    )
    # every question timed end to end, ours and each reference; the ratio is ours over bm25
    timing = report["timing"]
    assert set(timing) == {"ours", *REFERENCES, "ratio_p50", "ratio_p95"}
    for name in ("ours", *REFERENCES):
        assert 0 < timing[name]["p50_ms"] <= timing[name]["p95_ms"]
    for p in ("p50", "p95"):
        ratio = timing["ours"][f"{p}_ms"] / timing["bm25"][f"{p}_ms"]
        assert timing[f"ratio_{p}"] == pytest.approx(ratio, rel=1e-3)
    table = "\n".join(reference_table(report))
    assert all(name in table for name in ("ours", *REFERENCES)) and "ours - hybrid" in table
    assert f"compile p50 ours {timing['ours']['p50_ms']:.2f} ms" in table
    assert f"{timing['ratio_p50']:.1f}x" in table
