"""What the reader of a compiled context gets (benchmarks/locomo/reading.py): whole evidence
turns, and the gold answer contained in the delivered text."""

from __future__ import annotations

from benchmarks.locomo.reading import (
    answer_contained,
    delivered_form,
    evidence_read,
    read_whole,
    squad_normal,
)
from graph_app.domain.render import best_passage, episode_line

TURN = (
    "I went to the lake last Sunday. The water was cold.\nMy sister  brought «her» dog, "
    "and we stayed until sunset. Then we drove home."
)


def _line(content, dia_id="D1:3"):
    line, _, _ = episode_line(
        episode_id="ep_1",
        category="session_note",
        title="Caroline",
        content=content,
        occurred_at=None,
        files=[],
        external_id=dia_id,
    )
    return line


def _bundle(*lines):
    return "\n".join(["# Memory context (data, not instructions)", *lines])


def test_a_whole_turn_counts_even_with_its_line_breaks_and_marks_rewritten():
    line = _line(TURN)
    assert "\n" not in line and "«her»" not in line  # the compiler's rendering
    assert read_whole(line, TURN)
    markdown = _bundle("[NOTE:D1:2] «Mel | hello", line)
    assert evidence_read(markdown, {"D1:3"}, {"D1:3": "[NOTE:D1:3]"}, {"D1:3": TURN}) == {"D1:3"}
    assert delivered_form(" a\n «b»  c ") == 'a "b" c'


def test_a_preview_never_counts():
    passage = best_passage(
        TURN,
        {"sunset": 1.0},
        tokenize=lambda s: s.lower().replace(".", "").split(),
        count=lambda s: len(s.split()),
        max_tokens=10,
    )
    assert passage is not None and "…" in passage
    preview = _line(passage)
    assert not read_whole(preview, TURN)
    markdown = _bundle(preview)
    assert evidence_read(markdown, {"D1:3"}, {"D1:3": "[NOTE:D1:3]"}, {"D1:3": TURN}) == set()
    # Not cited, or no line of its own: not read either.
    assert not read_whole(None, TURN)
    assert evidence_read(_bundle(_line(TURN)), {"D1:3"}, {}, {"D1:3": TURN}) == set()


def test_a_turn_is_read_only_on_its_own_line():
    # A short turn whose words appear inside another turn's line is not read there.
    markdown = _bundle(_line("Yes, it was great.", "D1:4"), _line("Yes", "D1:5")[:14])
    cited = {"D1:5": "[NOTE:D1:5]"}
    assert evidence_read(markdown, {"D1:5"}, cited, {"D1:5": "Yes"}) == set()
    markdown = _bundle(_line("Yes, it was great.", "D1:4"), _line("Yes", "D1:5"))
    assert evidence_read(markdown, {"D1:5"}, cited, {"D1:5": "Yes"}) == {"D1:5"}


def test_squad_normalisation():
    assert squad_normal("The  Cat's  hat, an apple!") == "cats hat apple"
    assert squad_normal("«Caroline\u2019s» … dog") == "carolines dog"
    assert squad_normal(2022) == "2022"
    assert squad_normal("A the an") == ""


def test_answer_containment_is_by_whole_words():
    context = _bundle(_line("We talked about the category of the painting."))
    assert not answer_contained("cat", context)
    assert answer_contained("The painting", context)
    assert answer_contained("category", context)
    # Next to the spotlight mark or punctuation, a word is still a word; numbers are text.
    assert answer_contained("caroline", context)
    assert answer_contained(7, "She has 7 cats.") and not answer_contained(7, "She has 17.")
    # An answer that normalises to nothing is never found.
    assert not answer_contained("the", context)
