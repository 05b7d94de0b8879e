"""`manage.py screening_eval` runs on its corpus and prints a table, or one JSON object."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command

from benchmarks.screening.corpus import corpus_load, hosts_load
from benchmarks.screening.evaluate import _items


def test_the_corpus_has_both_splits_with_every_family_and_language():
    for split in ("tune", "heldout"):
        corpus = corpus_load(split)
        assert len({p.family for p in corpus.probes}) >= 18
        assert {p.lang for p in corpus.probes} >= {
            "en",
            "de",
            "fr",
            "es",
            "pt",
            "it",
            "zh",
            "ja",
            "ko",
            "ru",
        }
        assert any(b.topic == "llm_tooling" for b in corpus.benign)
        assert len({b.lang for b in corpus.benign}) >= 5
        assert corpus.secrets
    tune, heldout = corpus_load("tune"), corpus_load("heldout")
    assert not {p.text for p in tune.probes} & {p.text for p in heldout.probes}


def test_the_eval_prints_a_table_by_default():
    out = StringIO()
    call_command("screening_eval", "--split", "tune", stdout=out)
    text = out.getvalue()
    for heading in ("probes stopped", "benign flagged", "secrets masked", "time per 2 KB item"):
        assert heading in text
    assert " p50 " in text and " p95 " in text
    assert "homoglyph" in text and "aws_access_key" in text


def test_the_eval_prints_one_json_object_with_json():
    out = StringIO()
    call_command("screening_eval", "--split", "heldout", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["split"] == "heldout"
    assert set(result["per_family"]) >= {"homoglyph", "zero_width", "base64", "note_to_ai"}
    assert 0 <= result["benign_flagged"]["share"] <= 1
    timing = result["time_per_2kb_item"]
    assert 0 < timing["p50_ms"] <= timing["p95_ms"] <= timing["max_ms"]
    assert timing["item_chars"] == 2048 and timing["items_by_kind"]["probe"] == 81
    assert result["timing_hosts"] == {"hosts": 6, "flagged": [], "masked": []}


def test_timed_items_are_2_kb_of_notes_or_dialogue_carrying_each_probe_and_secret_whole():
    corpus = corpus_load("heldout")
    items = _items(corpus)
    assert all(len(text) == 2048 for _, text in items)
    carried = [text for kind, text in items if kind != "host"]
    pieces = [p.text for p in corpus.probes] + [s.text for s in corpus.secrets]
    assert all(piece in text for piece, text in zip(pieces, carried, strict=True))
    assert {h.topic for h in hosts_load()} == {"engineering", "llm_tooling", "dialogue"}
