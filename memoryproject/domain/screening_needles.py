"""Where the needles of instruction rules occur in a text, found once for all the rules.

A rule runs on a reading of a text only when the text holds a needle of each of its groups
(``InstructionRule.wanted``), and then only around the needles of its rarest group
(``InstructionRule.windows``). Looking for needles is most of the cost of screening a text that
matches nothing, so it runs in C as far as it can: ``str.find`` on an ASCII reading of the text
(every other character read as ``?``, offsets kept), a needle skipped when its first character
(not a letter) is absent, a group found at its first needle, and every result shared by the
rules and groups that hold the same needle.
"""

from __future__ import annotations

#: More places than this and a group gives no windows (they would cover most of the text).
SPOTS_MAX = 8


class Needles:
    """Where needles occur in one lowered text, found once for all the rules that share them."""

    def __init__(self, lowered: str) -> None:
        self.lowered = lowered
        # ASCII needles are looked for in the text with every other character read as "?"
        # (the offsets stay): str.find scans ASCII up to twice as fast as a text with a dash.
        self._narrow = (
            lowered if lowered.isascii() else lowered.encode("ascii", "replace").decode("ascii")
        )
        self._first: dict[str, int] = {}
        self._spots: dict[str, list[int]] = {}
        self._has: dict[tuple[str, ...], bool] = {}
        self._heads: dict[str, bool] = {}
        self._group_spots: dict[tuple[str, ...], list[int] | None] = {}

    def has(self, group: tuple[str, ...]) -> bool:
        """Whether a needle of ``group`` occurs (groups are shared by rules: found once)."""
        found = self._has.get(group)
        if found is None:
            first, found = self._first, False
            for needle, narrow, head in _PLANS.get(group) or _plan(group):
                at = first.get(needle)
                if (at if at is not None else self._find(needle, narrow, head)) >= 0:
                    found = True
                    break
            self._has[group] = found
        return found

    def first(self, needle: str) -> int:  # where needle first occurs, -1: nowhere
        at = self._first.get(needle)
        return at if at is not None else self._find(*_plan((needle,))[0])

    def _find(self, needle: str, narrow: bool, head: str) -> int:
        text = self._narrow if narrow else self.lowered
        if head:
            # A needle whose first character is not in the text is not either: one memchr
            # instead of a scan (most needles of markup and paths start with such a one).
            held = self._heads.get(head)
            if held is None:
                held = self._heads[head] = head in text
            if not held:
                self._first[needle] = -1
                return -1
        at = self._first[needle] = text.find(needle)
        return at

    def group_spots(self, group: tuple[str, ...]) -> list[int] | None:
        """Every place of a needle of ``group``, in order, or None past SPOTS_MAX."""
        if group in self._group_spots:
            return self._group_spots[group]
        found: list[int] = []
        spots: list[int] | None = found
        for needle in group:
            if self.first(needle) >= 0:
                found += self.spots(needle)
                if len(found) > SPOTS_MAX:
                    spots = None
                    break
        if spots:
            spots.sort()
        self._group_spots[group] = spots
        return spots

    def spots(self, needle: str) -> list[int]:
        """Up to SPOTS_MAX + 1 places of ``needle`` (no window is worth it past that)."""
        spots = self._spots.get(needle)
        if spots is None:
            spots = []
            at = self.first(needle)
            while at >= 0 and len(spots) <= SPOTS_MAX:
                spots.append(at)
                text = self._narrow if _plan((needle,))[0][1] else self.lowered
                at = text.find(needle, at + 1)
            self._spots[needle] = spots
        return spots


_PLANS: dict[tuple[str, ...], tuple[tuple[str, bool, str], ...]] = {}


def _plan(group: tuple[str, ...]) -> tuple[tuple[str, bool, str], ...]:
    """Per needle of ``group``: whether it is looked for in the ASCII reading of a text (a "?"
    read from outside ASCII is not one), and its first character when that is worth looking
    for first (not a letter)."""
    plan = _PLANS.get(group)
    if plan is None:
        plan = _PLANS[group] = tuple(
            (n, n.isascii() and "?" not in n, "" if n[:1].isalpha() else n[:1]) for n in group
        )
    return plan
