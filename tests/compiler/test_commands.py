"""Smoke tests of the benchmark and evaluation commands (correctness figures, not timings)."""

from __future__ import annotations

import io
import itertools
import json
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from benchmarks.locomo.tuning import GRID, _shipped, _variant
from graph_app.domain.profiles import DIALOGUE
from memoryproject.models import Project

pytestmark = pytest.mark.django_db
# The dataset is not shipped: LOCOMO_DATA names it, else ../shared/datasets/locomo beside the
# checkout (where the development machines keep it).
LOCOMO = Path(
    os.environ.get("LOCOMO_DATA")
    or Path(settings.BASE_DIR).parent / "shared" / "datasets" / "locomo"
)


def _run(*args):
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_memory_benchmark_small_is_compliant_and_never_stale():
    before = set(Project.objects.values_list("slug", flat=True))
    report = json.loads(_run("memory_benchmark", "--scale", "small", "--json"))
    assert report["budget_compliance_rate"] == 1.0
    assert report["stale_suppression_rate"] == 1.0
    assert report["stale_candidates"] > 0
    assert report["integrity_verified"] is True
    assert set(report["operations"]) == {
        "record_episode",
        "upsert_fact",
        "audit_contradictions",
        "entity_query",
        "compile_context",
        "compile_after_write",
        "integrity_verify",
    }
    assert report["operations"]["compile_context"]["n"] == 12
    # each one after a write of its own, as many as the writes timed
    assert (
        report["operations"]["compile_after_write"]["n"]
        == report["operations"]["upsert_fact"]["n"]
        > 0
    )
    assert set(Project.objects.values_list("slug", flat=True)) == before  # cleaned up


def test_memory_benchmark_prints_a_table_by_default():
    text = _run("memory_benchmark", "--scale", "small")
    assert "compile_context" in text and "budget compliance rate" in text


@pytest.mark.skipif(
    not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO} (it is not shipped)"
)
def test_locomo_eval_computes_recall_on_one_conversation():
    report = json.loads(
        _run("locomo_eval", "--data", str(LOCOMO), "--conversations", "conv-30", "--json")
    )
    overall = report["overall"]
    assert overall["questions"] > 0
    assert 0.0 <= overall["recall_all"] <= overall["recall_any"] <= 1.0
    # The floors a quality regression breaks, on what the reader gets: every evidence turn's
    # whole text delivered (0.815 measured at 800 tokens when it was set; 0.383 while the
    # dialogue profile gave 10 % of the budget to whole turns and cited the rest as 6-token
    # previews) and the gold answer contained (0.222 measured; 0.123 then).
    assert overall["full_all"] >= 0.78
    assert overall["answer_contained"] >= 0.19
    assert report["conversations"][0]["conversation"] == "conv-30"
    # Recall per question category, the categories' questions adding up to all of them.
    categories = report["categories"]
    assert set(categories) <= {"1", "2", "3", "4"} and len(categories) >= 2
    assert sum(c["questions"] for c in categories.values()) == overall["questions"]
    hits = sum(c["recall_all"] * c["questions"] for c in categories.values())
    assert hits == pytest.approx(overall["recall_all"] * overall["questions"])
    assert not Project.objects.filter(slug__startswith="locomo-eval-").exists()
    # What the reader gets: a whole evidence turn is rarer than a citation, and the delivered
    # text stays within the budget.
    assert report["profile"] == "dialogue" and report["budget"] == 800
    for row in [*report["conversations"], overall]:
        assert 0.0 <= row["full_all"] <= row["full_any"] <= row["recall_any"]
        assert row["full_all"] <= row["recall_all"]
        assert 0.0 <= row["answer_contained"] <= 1.0
        assert 0 < row["tokens_p50"] <= 800 and 0 < row["tokens_mean"] <= 800
        assert row["previews_mean"] >= 0.0 and 0.0 <= row["evidence_preview_share"] <= 1.0
    for c in categories.values():
        assert 0.0 <= c["full_all"] <= c["recall_all"] and 0.0 <= c["answer_contained"] <= 1.0


@pytest.mark.skipif(
    not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO} (it is not shipped)"
)
def test_locomo_eval_takes_the_profile_and_prints_the_reading_columns():
    args = ("locomo_eval", "--data", str(LOCOMO), "--conversations", "conv-30")
    report = json.loads(_run(*args, "--profile", "code", "--json"))
    assert report["profile"] == "code"
    assert {"full_all", "full_any", "answer_contained", "tokens_mean", "tokens_p50"} <= set(
        report["overall"]
    )
    assert {"previews_mean", "evidence_preview_share"} <= set(report["conversations"][0])
    table = _run(*args)
    assert "profile dialogue" in table and "full_all" in table and "ev prev" in table
    with pytest.raises(CommandError):
        _run(*args, "--profile", "prose")


def test_locomo_question_score_counts_whole_turns_and_previews():
    from benchmarks.locomo.recall import question_score
    from benchmarks.locomo.tuning import _hit

    markdown = (
        "# Memory context\n[NOTE:D1:1] «Mel | I adopted a cat named Oscar.\n"
        "[NOTE:D1:2] «Mel | … we went camping …"
    )
    items = [
        {"kind": "episode", "id": "ep_1", "citation": "[NOTE:D1:1]", "truncated": False},
        {"kind": "episode", "id": "ep_2", "citation": "[NOTE:D1:2]", "truncated": True},
    ]
    external = {"ep_1": "D1:1", "ep_2": "D1:2"}
    texts = {"D1:1": "I adopted a cat named Oscar.", "D1:2": "Later we went camping by the lake."}
    qa = {"evidence": {"D1:1", "D1:2"}, "answer": "Oscar", "category": 1}
    score = question_score({"markdown": markdown, "items": items}, qa, external, texts)
    assert score["hits_all"] and score["hits_any"]  # both cited
    assert not score["full_all"] and score["full_any"]  # one only as a preview
    assert score["contained"] and score["previews"] == 1
    assert (score["evidence_cited"], score["evidence_previewed"]) == (2, 1)
    delivered = (markdown, [("ep_1", "[NOTE:D1:1]"), ("ep_2", "[NOTE:D1:2]")])
    assert _hit("citation", qa["evidence"], delivered, external, texts)
    assert not _hit("full", qa["evidence"], delivered, external, texts)
    assert _hit("full", {"D1:1"}, delivered, external, texts)


def test_locomo_cross_validation_grid_holds_the_shipped_dialogue_profile():
    # The constants a user runs with are among those --cross-validate compares, and a grid
    # setting is turned back into exactly that profile.
    assert _shipped() in set(itertools.product(*GRID.values()))
    assert _variant(_shipped()) == DIALOGUE


@pytest.mark.skipif(
    not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO} (it is not shipped)"
)
def test_locomo_cross_validation_reports_held_out_answer_containment(monkeypatch):
    # Two settings (the shipped one and one giving a tenth of the budget to whole turns), two
    # conversations: each fold's held-out figures are those of the setting it chose.
    from benchmarks.locomo import tuning

    shipped = _shipped()
    monkeypatch.setattr(tuning, "GRID", {k: (v,) for k, v in zip(GRID, shipped, strict=True)})
    monkeypatch.setitem(tuning.GRID, "full_share", (0.1, DIALOGUE.full_share))
    paths = [LOCOMO / "conv-30.json", LOCOMO / "conv-26.json"]
    report = tuning.cross_validate(paths, budget=800, show_progress=False)
    folds = report["folds"]
    assert [f["chosen"]["full_share"] for f in folds] == [DIALOGUE.full_share] * 2
    assert all(0.0 < f["answer_contained"] < 1.0 for f in folds)
    low, high = sorted(f["answer_contained"] for f in folds)
    assert low <= report["cross_validated_answer_contained"] <= high
    assert report["cross_validated"] >= 0.7  # whole turns: most questions' evidence read whole


def test_distill_term_vectors_writes_a_table_from_a_model_folder(tmp_path):
    from safetensors.numpy import save_file

    from graph_app.domain.termvectors import TermVectors
    from tests.unit.test_distill import CONFIG, SHAPE, VOCAB, _weights

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**CONFIG, "model_type": "bert"}))
    (model / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    save_file(_weights(SHAPE, len(VOCAB)), str(model / "model.safetensors"))
    out = tmp_path / "table.npz"
    report = json.loads(
        _run(
            "distill_term_vectors", "--model", str(model), "--out", str(out), "--dim", "8", "--json"
        )
    )
    assert report["terms"] == 4 and report["words"] == 6 and report["dim"] == 4
    table = TermVectors.load(out)
    assert table.terms == ["activ", "dog", "puppi", "spain"]
    # Not a model folder: the option and what is missing are named.
    with pytest.raises(CommandError, match=r"--model: .* has no config\.json"):
        _run("distill_term_vectors", "--model", str(tmp_path), "--out", str(out))


def test_distill_term_vectors_reads_a_zipped_model_with_a_tokenizer_file(tmp_path):
    import zipfile

    from safetensors.numpy import save

    from graph_app.domain.termvectors import TermVectors
    from tests.unit.test_distill import CONFIG, SHAPE, VOCAB, _weights

    tokenizer = {"model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(VOCAB)}}}
    model = tmp_path / "model.zip"
    with zipfile.ZipFile(model, "w") as archive:  # as the semantic backend's package zips it
        archive.writestr("config.json", json.dumps({**CONFIG, "model_type": "bert"}))
        archive.writestr("tokenizer.json", json.dumps(tokenizer))
        archive.writestr("model.safetensors", save(_weights(SHAPE, len(VOCAB))))
    out = tmp_path / "table.npz"
    report = json.loads(
        _run("distill_term_vectors", "--model", str(model), "--out", str(out), "--json")
    )
    assert report["terms"] == 4 and report["words"] == 6
    assert TermVectors.load(out).terms == ["activ", "dog", "puppi", "spain"]
    # A zip without the weights: named as a folder's would be.
    with zipfile.ZipFile(model, "w") as archive:
        archive.writestr("config.json", json.dumps({**CONFIG, "model_type": "bert"}))
        archive.writestr("tokenizer.json", json.dumps(tokenizer))
    with pytest.raises(CommandError, match=r"--model: .* has no model\.safetensors"):
        _run("distill_term_vectors", "--model", str(model), "--out", str(out))
