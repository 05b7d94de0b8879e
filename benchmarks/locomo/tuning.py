"""The dialogue profile's constants chosen by cross-validation on LoCoMo
(``manage.py locomo_eval --cross-validate``): the objective of every setting of a grid on every
conversation, then leave-one-conversation-out. The objective is full-evidence recall (all):
every evidence turn's whole text in the delivered markdown (``benchmarks.locomo.reading``);
``citation`` scores citation recall (all) instead, every evidence turn cited, as a preview or
not."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.locomo.conversations import conversation_drop, conversation_ingest
from benchmarks.locomo.crossval import leave_one_out, pooled
from benchmarks.locomo.reading import HEADLINE_CATEGORIES, answer_contained, evidence_read
from graph_app.compiler import context_delivered
from graph_app.domain.profiles import DIALOGUE, Profile

# The dialogue profile's constants searched by --cross-validate (the shipped values are in it).
GRID = {
    "title_prior": (0.0, 0.85),
    "length_norm": (0.5, 0.75),
    "full_share": (0.35, 0.7, 1.0),
    "preview_tokens": (6, 32),
    "stream_weight": (0.5, 0.8),
    "related_weight": (0.0, 0.35),
}
# The grid's constants that are ranking parameters (the others are the profile's own).
RANK_CONSTANTS = ("title_prior", "length_norm", "stream_weight", "related_weight")


def _variant(setting: tuple[Any, ...]) -> Profile:
    values = dict(zip(GRID, setting, strict=True))
    rank = replace(DIALOGUE.rank, **{k: values.pop(k) for k in RANK_CONSTANTS})
    return replace(DIALOGUE, rank=rank, **values)


def _shipped() -> tuple[Any, ...]:
    return tuple(
        getattr(DIALOGUE.rank if name in RANK_CONSTANTS else DIALOGUE, name) for name in GRID
    )


OBJECTIVES = ("full", "citation")


def _hit(
    objective: str,
    evidence: set[str],
    delivered: tuple[str, list[tuple[str, str]]],
    external: dict[str, Any],
    texts: dict[str, str],
) -> bool:
    markdown, items = delivered
    cited = {turn: citation for i, citation in items if (turn := external.get(i))}
    if objective == "citation":
        return evidence <= set(cited)
    return evidence <= evidence_read(markdown, evidence, cited, texts)


def cross_validate(
    paths: list[Path], *, budget: int, show_progress: bool, objective: str = "full"
) -> dict[str, Any]:
    """``objective`` (full-evidence or citation recall, all) of every GRID setting on every
    conversation, then leave-one-conversation-out: each conversation scored with the setting
    that is best on the others."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective: one of {', '.join(OBJECTIVES)}")
    disable = None if show_progress else True
    scores: dict[tuple[Any, ...], dict[str, tuple[int, int]]] = {}
    # answer containment (categories 1, 2, 4) of every setting, reported, never optimised
    answers: dict[tuple[Any, ...], dict[str, tuple[int, int]]] = {}
    settings = list(itertools.product(*GRID.values()))
    for path in paths:
        project, external, questions, texts = conversation_ingest(path, disable=disable)
        try:
            for setting in tqdm(settings, desc=f"{path.stem} grid", disable=disable):
                profile = _variant(setting)
                hits = contained = headline = 0
                for qa in questions:
                    delivered = context_delivered(
                        project=project, query=qa["question"], max_tokens=budget, profile=profile
                    )
                    hits += _hit(objective, qa["evidence"], delivered, external, texts)
                    if qa["category"] in HEADLINE_CATEGORIES:
                        headline += 1
                        contained += answer_contained(qa["answer"], delivered[0])
                scores.setdefault(setting, {})[path.stem] = (hits, len(questions))
                answers.setdefault(setting, {})[path.stem] = (contained, headline)
        finally:
            conversation_drop(project)
    # No preference for the shipped setting on ties: it was chosen knowing every fold.
    cv = leave_one_out(scores)
    return {
        "budget": budget,
        "objective": objective,
        "grid": {k: list(v) for k, v in GRID.items()},
        "shipped": dict(zip(GRID, _shipped(), strict=True)),
        "shipped_in_sample": round(pooled(scores, _shipped(), [p.stem for p in paths]), 4),
        "best": dict(zip(GRID, cv.best, strict=True)),
        "best_in_sample": round(cv.in_sample, 4),
        "cross_validated": round(cv.cross_validated, 4),
        # each held-out conversation's answer containment under the setting its fold chose
        "cross_validated_answer_contained": round(
            _ratio(
                sum(answers[f.chosen][f.held_out][0] for f in cv.folds),
                sum(answers[f.chosen][f.held_out][1] for f in cv.folds),
            ),
            4,
        ),
        "folds": [
            {
                "held_out": f.held_out,
                "chosen": dict(zip(GRID, f.chosen, strict=True)),
                # the objective's figure on the held-out conversation
                "recall_all": round(_ratio(f.hits, f.questions), 4),
                "answer_contained": round(_ratio(*answers[f.chosen][f.held_out]), 4),
            }
            for f in cv.folds
        ],
    }


def _ratio(hits: int, count: int) -> float:
    return hits / count if count else 0.0
