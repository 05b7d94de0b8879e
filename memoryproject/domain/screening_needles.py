"""Where the needles of instruction rules occur in a text, found once for all the rules.

A rule runs on a reading of a text only when the text holds a needle of each of its groups
(``InstructionRule.wanted``), and then only around the needles of its rarest group
(``InstructionRule.windows``). Looking for needles was most of the cost of screening a text that
matches nothing (a scan of the text per needle), so the needles rules name are looked for in
one pass: an Aho-Corasick automaton of all the ASCII ones (``ahocorasick-rs``, compiled to a
DFA) gives every occurrence of every one of them, overlapping ones included, in the ASCII
reading of the text (every other character read as ``?``, offsets kept), and the rules read
their answers from that. A needle outside ASCII (only rules in other languages have them) or
one no rule named is looked for with ``str.find`` in the lowered text, when a rule asks.
"""

from __future__ import annotations

from collections.abc import Iterable

import ahocorasick_rs

#: More places than this and a group gives no windows (they would cover most of the text).
SPOTS_MAX = 8


class NeedleSet:
    """Needles looked for in one pass over a text: the ASCII ones (``register``) by an
    Aho-Corasick automaton made when first needed (anew after a registration)."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self._automaton: tuple[ahocorasick_rs.AhoCorasick, tuple[str, ...]] | None = None
        self._plans: dict[tuple[str, ...], tuple[frozenset[str], tuple[str, ...]]] = {}

    def register(self, needles: Iterable[str]) -> None:
        """Adds ``needles`` to those the automaton looks for. A needle outside ASCII, or
        holding "?" (which stands for any such character in the ASCII reading), is left to
        ``str.find``."""
        new = {n for n in needles if n and n.isascii() and "?" not in n} - self.known
        if new:
            self.known.update(new)
            self._automaton = None
            self._plans.clear()

    def _dfa(self) -> tuple[ahocorasick_rs.AhoCorasick, tuple[str, ...]]:
        if self._automaton is None:
            words = tuple(sorted(self.known))
            dfa = ahocorasick_rs.Implementation.DFA
            self._automaton = (ahocorasick_rs.AhoCorasick(words, implementation=dfa), words)
        return self._automaton

    def occurs(self, text: str) -> bool:
        """Whether ``text`` (ASCII) holds a registered needle."""
        return bool(self.known) and bool(self._dfa()[0].find_matches_as_indexes(text))

    def places(self, lowered: str) -> dict[str, list[int]]:
        """Every place of every registered needle in ``lowered`` (overlapping ones too), by
        needle, in order; a needle that does not occur is not a key."""
        places: dict[str, list[int]] = {}
        if not self.known:
            return places
        automaton, words = self._dfa()
        narrow = lowered if lowered.isascii() else lowered.encode("ascii", "replace").decode()
        for index, start, _end in automaton.find_matches_as_indexes(narrow, overlapping=True):
            needle = words[index]
            found = places.get(needle)
            if found is None:
                places[needle] = [start]
            else:
                found.append(start)
        return places

    def plan(self, group: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
        """The needles of ``group`` the automaton looks for, and the others."""
        plan = self._plans.get(group)
        if plan is None:
            plan = self._plans[group] = (
                frozenset(n for n in group if n in self.known),
                tuple(n for n in group if n not in self.known),
            )
        return plan

    def holds(self, lowered: str, places: dict[str, list[int]], group: tuple[str, ...]) -> bool:
        """Whether ``lowered``, whose ``places`` are given, holds a needle of ``group``."""
        known, others = self.plan(group)
        return not places.keys().isdisjoint(known) or (
            bool(others) and any(map(lowered.__contains__, others))
        )

    def starts(
        self, lowered: str, places: dict[str, list[int]], needles: tuple[str, ...]
    ) -> list[int]:
        """Every place in ``lowered`` where one of ``needles`` starts, in order."""
        starts: set[int] = set()
        for needle in needles:
            if needle in self.known:
                starts.update(places.get(needle, ()))
            else:
                at = lowered.find(needle)
                while at >= 0:
                    starts.add(at)
                    at = lowered.find(needle, at + 1)
        return sorted(starts)


#: The needles instruction rules name (``InstructionRule`` registers its own).
INSTRUCTION_NEEDLES = NeedleSet()


def needles_register(needles: Iterable[str]) -> None:
    """Adds ``needles`` to those ``Needles`` finds in one pass."""
    INSTRUCTION_NEEDLES.register(needles)


class Needles:
    """Where needles occur in one lowered text, found once for all the rules that share them."""

    def __init__(self, lowered: str) -> None:
        self.lowered = lowered
        self._places = INSTRUCTION_NEEDLES.places(lowered)
        self._has: dict[tuple[str, ...], bool] = {}
        self._other: dict[str, list[int]] = {}
        self._group_spots: dict[tuple[str, ...], list[int] | None] = {}

    def has(self, group: tuple[str, ...]) -> bool:
        """Whether a needle of ``group`` occurs (groups are shared by rules: found once)."""
        found = self._has.get(group)
        if found is None:
            known, others = INSTRUCTION_NEEDLES.plan(group)
            found = self._has[group] = not self._places.keys().isdisjoint(known) or (
                bool(others) and any(self.first(needle) >= 0 for needle in others)
            )
        return found

    def holds_all(self, plans: Iterable[tuple[frozenset[str], tuple[str, ...]]]) -> bool:
        """Whether a needle of every group occurs, the groups given by their plans."""
        found = self._places.keys()
        for known, others in plans:
            if found.isdisjoint(known) and not (
                others and any(self.first(needle) >= 0 for needle in others)
            ):
                return False
        return True

    def first(self, needle: str) -> int:  # where needle first occurs, -1: nowhere
        places = self._places.get(needle)
        if places is not None:
            return places[0]
        if needle in INSTRUCTION_NEEDLES.known:
            return -1
        return self.lowered.find(needle)

    def group_spots(self, group: tuple[str, ...]) -> list[int] | None:
        """Every place of a needle of ``group``, in order, or None past SPOTS_MAX."""
        if group in self._group_spots:
            return self._group_spots[group]
        found: list[int] = []
        spots: list[int] | None = found
        places = self._places
        for needle in group:
            at = places.get(needle)
            if at is None:
                if needle in INSTRUCTION_NEEDLES.known or self.first(needle) < 0:
                    continue
                at = self.spots(needle)
            found += at
            if len(found) > SPOTS_MAX:
                spots = None
                break
        if spots:
            spots.sort()
        self._group_spots[group] = spots
        return spots

    def spots(self, needle: str) -> list[int]:
        """Up to SPOTS_MAX + 1 places of ``needle`` (no window is worth it past that)."""
        places = self._places.get(needle)
        if places is not None:
            return places[: SPOTS_MAX + 1]
        if needle in INSTRUCTION_NEEDLES.known:
            return []
        spots = self._other.get(needle)
        if spots is None:
            spots = []
            at = self.lowered.find(needle)
            while at >= 0 and len(spots) <= SPOTS_MAX:
                spots.append(at)
                at = self.lowered.find(needle, at + 1)
            self._other[needle] = spots
        return spots
