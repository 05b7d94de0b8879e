"""Session summaries are scored by what the next session can act on, not by length."""

from sessions_app.domain.summary import ELEMENTS, summary_score
from sessions_app.domain.trust import ESCALATE, PASS
from tests.sessions_app.factories import STRUCTURED_SUMMARY, vague_summary

LOAD_THRESHOLD = 0.45

PROSE_SUMMARY = (
    "Today we kept working on the memoryproject repository. We decided to store saved "
    "summaries as Trace rows with policy session_save, because /v1/traces should list them. "
    "I implemented POST /v1/sessions/save in sessions_app/services.py and 42 tests now pass on "
    "SQLite. Still need to decide whether load falls back to older summaries; is 14 days the "
    "right SESSION_MAX_AGE_DAYS default?"
)


def test_structured_summary_passes_with_every_element_labelled():
    scored = summary_score(STRUCTURED_SUMMARY)
    assert scored.score.decision == PASS
    assert scored.score.confidence >= 0.9
    assert {name: f.evidence for name, f in scored.elements.items()} == dict.fromkeys(
        ELEMENTS, "labelled"
    )


def test_filler_of_the_same_length_fails_the_load_threshold():
    vague = vague_summary(len(STRUCTURED_SUMMARY))
    assert len(vague) == len(STRUCTURED_SUMMARY)
    scored = summary_score(vague)
    assert scored.score.confidence < LOAD_THRESHOLD
    assert scored.score.decision == ESCALATE
    assert scored.vague_terms > 10
    assert scored.specifics == 0


def test_a_concrete_prose_summary_without_labels_still_clears_the_load_threshold():
    scored = summary_score(PROSE_SUMMARY)
    assert scored.score.confidence >= LOAD_THRESHOLD
    assert scored.elements["key_files"].evidence == "path"
    assert scored.elements["last_decision"].evidence == "cue"


def test_labels_with_vague_content_earn_little():
    gamed = (
        "Active project: stuff\nLast decision: things\nCurrent output: some progress\n"
        "Open questions: whatever\nKey files: misc\n"
    ) * 4
    scored = summary_score(gamed)
    assert all(f.evidence == "labelled_thin" for f in scored.elements.values())
    assert scored.score.confidence < LOAD_THRESHOLD


def test_a_short_summary_is_penalised_as_risky():
    scored = summary_score("Active project: memoryproject\nLast decision: use sessions_app.")
    assert scored.too_short > 0.8
    assert scored.score.ua > 0.4
    assert scored.score.confidence < LOAD_THRESHOLD


def test_hedging_outside_open_questions_raises_risk_but_inside_does_not():
    hedged = STRUCTURED_SUMMARY.replace(
        "Store saved summaries", "Maybe we might probably store saved summaries"
    )
    assert summary_score(hedged).hedges == 3
    assert summary_score(hedged).score.ua > summary_score(STRUCTURED_SUMMARY).score.ua
    assert summary_score(STRUCTURED_SUMMARY).hedges == 0


def test_repeating_one_concrete_line_is_caught_as_repetition():
    line = "Implemented sessions_app/services.py for the memoryproject repository today. "
    scored = summary_score(line * 12)
    assert scored.repetition > 0.8
    assert scored.score.confidence < LOAD_THRESHOLD


def test_signals_name_every_element_and_component():
    signals = summary_score(STRUCTURED_SUMMARY).signals()
    assert set(signals) >= {"p", "ue", "ua", "total_uncertainty", "elements", "components"}
    assert set(signals["elements"]) == set(ELEMENTS)
    assert set(signals["components"]) == {
        "vagueness",
        "unspecific",
        "repetition",
        "too_short",
        "hedging",
    }


def test_labelled_sections_are_extracted_as_structured_fields():
    sections = summary_score(STRUCTURED_SUMMARY).sections
    assert sections["active_project"].startswith("memoryproject:")
    assert sections["key_files"] == ["sessions_app/services.py", "sessions_app/domain/summary.py"]
    assert len(sections["open_questions"]) == 2


def test_label_like_lines_inside_a_section_stay_in_that_section():
    text = (
        "## Current output\nPlan endpoint shipped.\nStatus: 42 tests passing\nNote: on SQLite\n"
        "## Misc\nunrelated\n"
    )
    sections = summary_score(text).sections
    assert sections["current_output"] == (
        "Plan endpoint shipped.\nStatus: 42 tests passing\nNote: on SQLite"
    )


GENERIC_PROSE = (
    "Today the team had a productive session and covered a wide range of topics across the "
    "whole system. Several parts were reviewed in depth and the overall direction was discussed "
    "at length with everyone involved. The work continued steadily and the plan still holds; "
    "more will follow in the next session once everyone has had time to reflect on what was "
    "said. The mood was positive and the collaboration worked well for all involved parties. "
    "We expect the remaining work to go smoothly and will report back as planned soon after."
)
LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. "


def test_any_noise_the_length_of_a_good_summary_fails_the_load_threshold():
    size = len(STRUCTURED_SUMMARY)
    for noise in (GENERIC_PROSE, LOREM * 10, "a" * size, "word " * 200):
        text = (noise * (size // len(noise) + 1))[:size]
        assert summary_score(text).score.confidence < LOAD_THRESHOLD, text[:40]
