"""Choosing constants by cross-validation: tuned on some groups, measured on the others.

Given, for every candidate setting, the hits and question counts per group (per conversation),
``leave_one_out`` picks for each group the setting that scores best on all the *other* groups
and scores it on the held-out one. The pooled held-out figure says how well the tuning
procedure generalises; the in-sample figure (best setting scored on everything) does not. Pure
Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# setting -> group -> (hits, questions)
Scores = Mapping[Any, Mapping[str, tuple[int, int]]]


@dataclass(frozen=True)
class Fold:
    held_out: str
    chosen: Any
    hits: int
    questions: int


@dataclass(frozen=True)
class CrossValidation:
    folds: list[Fold]
    cross_validated: float  # pooled over the held-out groups
    best: Any  # the setting chosen on every group
    in_sample: float  # that setting's figure on every group


def pooled(scores: Scores, setting: Any, groups: Sequence[str]) -> float:
    hits = sum(scores[setting][g][0] for g in groups)
    questions = sum(scores[setting][g][1] for g in groups)
    return hits / questions if questions else 0.0


def _choose(scores: Scores, groups: Sequence[str], prefer: Any | None) -> Any:
    # Ties go to ``prefer`` (the current default), then to the first setting listed.
    settings = list(scores)
    return max(
        settings,
        key=lambda s: (pooled(scores, s, groups), s == prefer, -settings.index(s)),
    )


def leave_one_out(scores: Scores, *, prefer: Any | None = None) -> CrossValidation:
    """Leave-one-group-out cross-validation over ``scores`` (at least two groups)."""
    groups = sorted({g for per_group in scores.values() for g in per_group})
    if len(groups) < 2:
        raise ValueError("cross-validation needs at least two groups")
    folds = []
    for held in groups:
        chosen = _choose(scores, [g for g in groups if g != held], prefer)
        hits, questions = scores[chosen][held]
        folds.append(Fold(held_out=held, chosen=chosen, hits=hits, questions=questions))
    total = sum(f.questions for f in folds)
    best = _choose(scores, groups, prefer)
    return CrossValidation(
        folds=folds,
        cross_validated=sum(f.hits for f in folds) / total if total else 0.0,
        best=best,
        in_sample=pooled(scores, best, groups),
    )
