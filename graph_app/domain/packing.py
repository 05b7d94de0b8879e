"""Token-budget packing: the best cited lines that fit ``max_tokens``, framing included.

Items are chosen greedily by utility density (utility per token), so several short, relevant
lines beat one long, slightly more relevant one. An item longer than a share of the budget is
truncated first (its citation is always kept). Past a share of the budget, items may be shown
as previews (a shorter line with the same citation, built by the caller), so more sources fit.
Leftover room at the end is filled with a cut-down copy of the best item that did not fit.
Token counts are estimates per line until
the end: the final markdown (title, section headings, lines) is counted as a whole (from its
lines' counts where the caller's ``count_lines`` knows how the tokenizer joins them) and items
are dropped, least dense first, until it fits, so the bundle never exceeds ``max_tokens``
whatever the tokenizer does at line boundaries. The counter is passed in (the product's
cl100k counter in production). Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from graph_app.domain.tiebreak import TieKey

TITLE = "# Memory context"
ELLIPSIS = "…"
# An item may take at most this share of the budget before it is truncated.
ITEM_BUDGET_SHARE = 0.35
# Below this many tokens of room, a truncated line carries too little to be worth its citation.
MIN_TRUNCATED_TOKENS = 24


# Not frozen: a compile makes over a hundred (a frozen dataclass's fields cost twice as much to
# set); it is never changed once made (``replace`` makes the variants).
@dataclass(slots=True)
class PackItem:
    """One candidate line. ``text[:keep]`` (the citation) and the last ``tail`` characters
    (what closes the line) are never cut; what lies between may be truncated when
    ``truncatable``. ``order`` sorts lines inside their section. ``tie`` orders items equal on
    everything else (``tiebreak.tie_key`` of the document), before ``key``; ``nominal_tokens``,
    when given, is the cost the utility density is ordered by (the budget takes the real one)."""

    key: str
    text: str
    utility: float
    section: str = ""
    keep: int = 0
    tail: int = 0
    truncatable: bool = False
    order: tuple[float, ...] = field(default=())
    # whether the packer may ask for a preview of it (costly: only for items that have one)
    previewable: bool = False
    tie: TieKey = (0.0, "", "")
    # tokens of the line as ordering counts them when its real count depends on ids the
    # server made (a fact's citation and hash): -1, its real count
    nominal_tokens: int = -1


@dataclass(frozen=True)
class PackedItem:
    key: str
    text: str
    utility: float
    tokens: int
    truncated: bool
    section: str


@dataclass(frozen=True)
class Packed:
    markdown: str
    token_count: int
    items: list[PackedItem]


def render(
    items: Sequence[PackedItem | PackItem], *, title: str = TITLE, sections: Sequence[str] = ()
) -> str:
    """The markdown bundle: title, then each non-empty section with its lines."""
    return "\n".join(
        line if isinstance(line, str) else line.text
        for line in _lines(items, title=title, sections=sections)
    )


def _lines(
    items: Sequence[PackedItem | PackItem], *, title: str, sections: Sequence[str]
) -> list[str | PackedItem | PackItem]:
    """The bundle's lines in order: the title and the section headings as text, the items as
    themselves (their line is their ``text``)."""
    if not items:
        return [title]
    order = {name: index for index, name in enumerate(sections)}
    by_section: dict[str, list[PackedItem | PackItem]] = {}
    for item in items:
        by_section.setdefault(item.section, []).append(item)
    lines: list[str | PackedItem | PackItem] = [title]
    for name in sorted(by_section, key=lambda s: (order.get(s, len(order)), s)):
        if name:
            lines.append(f"## {name}")
        lines.extend(by_section[name])
    return lines


def truncate(item: PackItem, max_tokens: int, count: Callable[[str], int]) -> PackItem | None:
    """``item`` cut (at a word boundary when possible) so its line takes at most
    ``max_tokens``; None when not even the citation and a few words fit."""
    if count(item.text) <= max_tokens:
        return item
    if not item.truncatable:
        return None
    head, body, end = split_line(item)
    if count(head + ELLIPSIS + end) > max_tokens:
        return None
    low, high = 0, len(body)
    while low < high:
        mid = (low + high + 1) // 2
        if count(head + body[:mid] + ELLIPSIS + end) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    cut = body[:low]
    space = cut.rfind(" ")
    if space > len(cut) // 2:
        cut = cut[:space]
    return replace(item, text=head + cut.rstrip() + ELLIPSIS + end)


def split_line(item: PackItem) -> tuple[str, str, str]:
    """(head, body, tail) of the item's line: only the body may be cut."""
    end = len(item.text) - item.tail
    return item.text[: item.keep], item.text[item.keep : end], item.text[end:]


_Candidate = tuple[PackItem, int, bool]  # the line, its tokens (newline included), truncated


@dataclass
class _Room:
    """One packing: what is left of the budget, the sections whose heading is paid for, the
    lines taken so far."""

    count: Callable[[str], int]
    preview: Callable[[PackItem], PackItem | None] | None
    remaining: int
    section_cost: dict[str, int]
    opened: set[str] = field(default_factory=set)
    chosen: list[_Candidate] = field(default_factory=list)

    def heading(self, section: str) -> int:
        """Tokens of the section's heading if it is not shown yet."""
        return self.section_cost.get(section, 0) if section not in self.opened else 0

    def take(self, candidate: _Candidate, cost: int, section: str) -> None:
        self.chosen.append(candidate)
        self.remaining -= cost
        if section:
            self.opened.add(section)

    def choose(self, candidates: list[_Candidate], full_room: int) -> list[_Candidate]:
        """Takes each candidate that fits, as a preview once full lines have used ``full_room``
        or when only its preview fits; answers those that did not fit."""
        count, preview = self.count, self.preview
        full_used = 0
        left_out: list[_Candidate] = []
        for candidate in candidates:
            item, tokens, _ = candidate
            shown = candidate
            heading = self.heading(item.section)
            if (
                preview is not None
                and item.previewable
                and (full_used + tokens > full_room or tokens + heading > self.remaining)
                # no room even for the citation: not worth building the preview
                and count(item.text[: item.keep]) + heading < self.remaining
            ):
                short = preview(item)
                if short is not None:
                    short_tokens = count(short.text) + 1
                    if short_tokens < tokens:
                        shown = (short, short_tokens, True)
            shown_item, shown_tokens, _ = shown
            cost = shown_tokens + self.heading(shown_item.section)
            if cost <= self.remaining:
                self.take(shown, cost, shown_item.section)
                if shown is candidate:
                    full_used += shown_tokens
            else:
                left_out.append(candidate)
        return left_out

    def fill(self, left_out: list[_Candidate]) -> None:
        """Fills what is left with the best items that did not fit, cut down to the room."""
        count, preview = self.count, self.preview
        for item, _, _ in sorted(left_out, key=lambda c: (-c[0].utility, c[0].tie, c[0].key)):
            if not item.truncatable:
                continue
            section_extra = self.heading(item.section)
            space = self.remaining - section_extra - 1
            if space < MIN_TRUNCATED_TOKENS:
                break
            short = preview(item) if preview is not None and item.previewable else None
            if short is not None and count(short.text) <= space:
                filler: PackItem | None = short  # its best part rather than its opening
            else:
                filler = truncate(short or item, space, count)
            if filler is None:
                continue
            tokens = count(filler.text) + 1
            self.take((filler, tokens, True), tokens + section_extra, item.section)


def pack(
    items: Sequence[PackItem],
    *,
    max_tokens: int,
    count: Callable[[str], int],
    title: str = TITLE,
    sections: Sequence[str] = (),
    preview: Callable[[PackItem], PackItem | None] | None = None,
    full_share: float = 1.0,
    count_lines: Callable[[Sequence[str], Sequence[int]], int] | None = None,
) -> Packed:
    """Greedy utility-density packing under ``max_tokens`` counted over the final markdown.

    With ``preview``, lines keep their full text until they have used ``full_share`` of the
    budget; after that each item is shown as ``preview(item)`` (a shorter line with the same
    citation; None when there is none), so more sources fit. ``count_lines`` counts the
    rendered bundle from its lines and each line's count (default: ``count`` of the joined
    text), so that a bundle need not be counted again as a whole."""
    if count(title) > max_tokens:
        return Packed(markdown="", token_count=0, items=[])
    candidates = _candidates(items, max_tokens, count)
    room = _Room(
        count=count,
        preview=preview,
        remaining=max_tokens - count(title),
        section_cost={
            name: count(f"\n## {name}") for name in {c[0].section for c in candidates} if name
        },
    )
    # Full lines may use this much of the budget; past it, items come as previews.
    full_room = int(max_tokens * full_share) if preview is not None else max_tokens
    room.fill(room.choose(candidates, full_room))
    return _bundle(
        room.chosen,
        max_tokens=max_tokens,
        count=count,
        count_lines=count_lines or (lambda lines, _counts: count("\n".join(lines))),
        title=title,
        sections=sections,
    )


def _candidates(
    items: Sequence[PackItem], max_tokens: int, count: Callable[[str], int]
) -> list[_Candidate]:
    """The items worth anything with their cost, best utility density first; an item longer
    than its share of the budget is truncated to that share."""
    cap = max(MIN_TRUNCATED_TOKENS, int(max_tokens * ITEM_BUDGET_SHARE))
    candidates: list[_Candidate] = []
    for item in items:
        if item.utility <= 0:
            continue
        tokens = count(item.text) + 1  # the newline before it
        truncated = False
        if tokens > cap and item.truncatable:
            cut = truncate(item, cap - 1, count)
            if cut is not None:  # else: too long for the cap, still a candidate for the fill
                item, tokens, truncated = cut, count(cut.text) + 1, True
        candidates.append((item, tokens, truncated))
    # Utility density by the nominal tokens where given (not for a cut line: its own count).
    candidates.sort(
        key=lambda c: (
            -c[0].utility
            / (c[0].nominal_tokens + 1 if c[0].nominal_tokens >= 0 and not c[2] else c[1]),
            -c[0].utility,
            c[0].tie,
            c[0].key,
        )
    )
    return candidates


def _bundle(
    chosen: list[_Candidate],
    *,
    max_tokens: int,
    count: Callable[[str], int],
    count_lines: Callable[[Sequence[str], Sequence[int]], int],
    title: str,
    sections: Sequence[str],
) -> Packed:
    """The chosen lines in their sections' order, rendered and counted as a whole."""
    packed = [
        PackedItem(
            key=item.key,
            text=item.text,
            utility=item.utility,
            tokens=tokens - 1,
            truncated=truncated,
            section=item.section,
        )
        for item, tokens, truncated in chosen
    ]
    orders = {item.key: (item.order, item.tie) for item, _, _ in chosen}
    packed.sort(key=lambda p: (orders[p.key][0], -p.utility, orders[p.key][1], p.key))

    def rendered() -> tuple[str, int]:
        lines = _lines(packed, title=title, sections=sections)
        texts = [line if isinstance(line, str) else line.text for line in lines]
        counts = [
            count(line) if isinstance(line, str) else cast(PackedItem, line).tokens
            for line in lines
        ]
        return "\n".join(texts), count_lines(texts, counts)

    markdown, total = rendered()
    # Line estimates can drift at boundaries: the whole bundle is the measure.
    while total > max_tokens and packed:
        weakest = min(packed, key=lambda p: (p.utility / max(p.tokens, 1), p.utility))
        packed.remove(weakest)
        markdown, total = rendered()
    return Packed(markdown=markdown, token_count=total, items=packed)
