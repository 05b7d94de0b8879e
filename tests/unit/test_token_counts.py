"""The cl100k count of lines joined by newlines, made from each line's own count
(``memoryproject.tokens.joined_tokens``), against counting the joined text; and the key a cache
of counts is kept by (``count_key``), against counting the text itself."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryproject.tokens import count_key, count_tokens, encoding, joined_tokens

# Letters, digits, punctuation, spaces of several kinds, a carriage return, an apostrophe
# before contraction letters, combining marks, non-Latin letters and digits, emoji: whatever
# can sit at the end or start of a line.
_CHARS = list("abcXYZsdmtlvre019 .,!?;:'\"()[]«»|-_#*/\\\t\r\u00a0\u2003\u0301\u0308")
_CHARS += list("éßø日本語١٢٣Ⅻ😀👍🏽…\u2013\u2014")
_LINE = st.text(alphabet=st.sampled_from(_CHARS), max_size=24)
_WORD_START = st.sampled_from(list("[#-aZ0é日😀.«("))


def _joined(lines: list[str]) -> int:
    return joined_tokens(lines, [count_tokens(line) for line in lines])


@settings(max_examples=600, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=8))
def test_any_lines_count_as_the_joined_text(lines: list[str]) -> None:
    assert _joined(lines) == count_tokens("\n".join(lines))


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(_WORD_START, _LINE), min_size=1, max_size=8))
def test_lines_starting_with_a_non_space_count_as_the_joined_text(
    parts: list[tuple[str, str]],
) -> None:
    # the case counted from the lines' own counts (the others are counted whole)
    lines = [start + rest for start, rest in parts]
    assert _joined(lines) == count_tokens("\n".join(lines))


def test_a_bundle_counts_as_rendered() -> None:
    lines = [
        "# Memory context",
        "## Facts",
        "[NOTE:D3:12] «Caroline (2023-05-08) | I went to the LGBTQ support group yesterday!",
        "[FACT:7f3a] payments.retry_policy = exponential backoff, 5 attempts.",
        "[NOTE:D1:2] «Melanie | Wow, that's cool…",
        "[NOTE:D9:4] «Caroline | 2022",
    ]
    assert _joined(lines) == count_tokens("\n".join(lines))


def test_empty_and_indented_lines_are_counted_whole() -> None:
    for lines in (["a.", "", "b"], ["a", " b"], ["a!", "\tb"], ["a", "\u00a0b"], [""], ["", "x"]):
        assert _joined(lines) == count_tokens("\n".join(lines))


def test_every_run_of_up_to_three_ascii_digits_is_one_token() -> None:
    # what count_key rests on: no digit string of one to three digits counts more than another
    runs = [f"{n:0{width}d}" for width in (1, 2, 3) for n in range(10**width)]
    assert len(runs) == 1110
    assert {len(encoding().encode_ordinary(run)) for run in runs} == {1}


# ASCII text where digits meet letters, punctuation, spaces, newlines and other digits.
_ASCII = st.text(alphabet=st.sampled_from(list("ab Zs't.,-_:#@/\n\t0123456789")), max_size=40)


@settings(max_examples=800, deadline=None)
@given(_ASCII)
def test_an_ascii_texts_key_counts_as_the_text(text: str) -> None:
    assert count_tokens(count_key(text)) == count_tokens(text)


def test_texts_differing_in_their_digits_share_a_key_and_others_do_not() -> None:
    assert count_key("## Episodes 2026-03-14") == count_key("## Episodes 2025-11-02")
    assert count_key("order_worker_7 max retries 5") == "order_worker_0 max retries 0"
    # a digit more is another count, and another key
    assert count_key("retry 10 times") != count_key("retry 9 times")
    assert count_tokens("retry 1000 times") != count_tokens("retry 100 times")
    # non-ASCII text (where other numerals may join a run of digits) keeps its own key
    arabic = "\u0661\u0662\u0663"  # ARABIC-INDIC DIGITS ONE TO THREE
    assert count_key(f"{arabic}2 2026") == f"{arabic}2 2026"
