"""What ranking reads as related terms, and what it never does: words that name a time or a
count are never related to one another, and each related term weighs its best share of a query
term's weight (``MemoryIndex.rank``; the vectors are ``termvectors.py``'s). Pure Python: no
Django import.
"""

from __future__ import annotations

from graph_app.domain.tokenize import MONTH_NAMES, stems

# Words that name a time or a count: a neighbouring one ("month" for "year", "fourth" for
# "third") is another answer, not another wording of the same one, so they are never related
# terms, either way.
FIXED_WORDS = (
    "year",
    "years",
    "month",
    "months",
    "week",
    "weeks",
    "weekend",
    "day",
    "days",
    "today",
    "yesterday",
    "tomorrow",
    "tonight",
    "morning",
    "afternoon",
    "evening",
    "night",
    "ago",
    "last",
    "next",
    "recent",
    "recently",
    "lately",
    "soon",
    "later",
    "earlier",
    "time",
    "times",
    "hour",
    "hours",
    "minute",
    "minutes",
    "decade",
    "century",
    "annual",
    "daily",
    "weekly",
    "monthly",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "twenty",
    "hundred",
    "thousand",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "once",
    "twice",
)
FIXED_TERMS = stems(FIXED_WORDS + MONTH_NAMES)


def related_shares(
    related: list[tuple[str, list[tuple[str, float]]]], weight: float
) -> tuple[tuple[str, float], ...]:
    """Each related term once, with its largest share of a query term's weight."""
    best: dict[str, float] = {}
    for _term, near in related:
        for other, similarity in near:
            best[other] = max(best.get(other, 0.0), weight * similarity)
    return tuple(sorted(best.items()))
