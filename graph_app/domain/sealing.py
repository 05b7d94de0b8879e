"""Verification of a project's graph against its hash-chained change log.

First the chain: every entry must match its own hash, follow its predecessor at the next seq
and link to it by ``prev_hash``; the last entry must be the head the project's revision row
keeps, and a checkpoint's (size, head) must still be the entry at that seq (prefix
consistency). Then the tables as a set: each record found must be in the state the log's last
entry for it says (its hash), and every record the log knows must still be there. Each problem
names the entry or record at fault and says why, so that a deletion, an insertion, a duplicate,
a rewrite (even with its own hash recomputed) and a gap in the log are told apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

from graph_app.domain.records import change_hash
from memoryproject.domain.hash_chain import GENESIS_HASH
from memoryproject.domain.instants import UtcText

ERASED = "erased"

#: Problem kinds: a row whose content no longer matches its own stored hash ("mismatch"), a
#: row that differs from its last sealed change although its own hash agrees ("rewritten"),
#: an episode whose file rows or entity links are not the ones its hash covers ("index"), a row
#: whose revision contradicts the log ("revision"), rows gone or never sealed ("deleted",
#: "inserted", "duplicated"), and breaks of the log itself ("chain", "head", "checkpoint").
PROBLEM_KINDS = (
    "mismatch",
    "rewritten",
    "index",
    "revision",
    "deleted",
    "inserted",
    "duplicated",
    "chain",
    "head",
    "checkpoint",
)


class ChangeEntry(NamedTuple):
    """A stored change log entry, as read (a tuple: verification reads every entry). Its
    fields before ``hash`` are ``change_hash``'s arguments after the project, in order."""

    seq: int
    revision: int
    action: str
    record_type: Literal["fact", "episode", "entity"]
    record_id: str
    record_sha256: str
    erased_sha256: str
    note: str
    # In iso_utc's form when read for verification (utc_text), else a datetime.
    recorded_at: datetime | UtcText
    prev_hash: str
    hash: str


class Problem(NamedTuple):
    kind: str
    record_type: str  # fact | episode | entity | change
    id: str
    reason: str


class FoundRecord(NamedTuple):
    """A record as found in its table: the hash of its canonical form now, whether that is the
    hash stored on the row (facts and episodes keep one), its revision stamp, and what is wrong
    with its index rows (an episode's files and entity links), if anything."""

    sha256: str
    stored_matches: bool = True
    revision: int | None = None
    index_problem: str | None = None


Key = tuple[str, str]


@dataclass
class ChainReport:
    """The chain as verified: entries read, the last one's hash, problems, the state of every
    record after its last entry, and the erasures."""

    size: int = 0
    head: str = GENESIS_HASH
    problems: list[Problem] = field(default_factory=list)
    state: dict[Key, ChangeEntry] = field(default_factory=dict)
    erased: list[ChangeEntry] = field(default_factory=list)
    #: The hash of the chained entry at the seq being watched (a checkpoint's size).
    watched_hash: str | None = None
    checkpoint: tuple[int, str] | None = None
    checkpoint_consistent: bool | None = None


def _entry(seq: int | str) -> str:
    return str(seq)


def _link_problem(entry: ChangeEntry, previous: ChangeEntry | None, own_ok: bool) -> Problem:
    """Names the entry at fault when ``entry.prev_hash`` is not its predecessor's hash: the
    predecessor when ``entry`` itself is intact (its prev_hash is what the predecessor hashed
    to when ``entry`` was appended, so the predecessor was rewritten and rehashed since), else
    ``entry``."""
    if own_ok and previous is not None:
        return Problem(
            "chain",
            "change",
            _entry(previous.seq),
            f"entry #{previous.seq} ({previous.record_type} {previous.record_id}) was rewritten "
            f"with its hash recomputed: entry #{entry.seq} links to a different hash",
        )
    return Problem(
        "chain",
        "change",
        _entry(entry.seq),
        f"its prev_hash does not link to entry #{entry.seq - 1}",
    )


def _tombstone_problem(entry: ChangeEntry, before: ChangeEntry | None) -> Problem | None:
    if before is None or entry.erased_sha256 == before.record_sha256:
        return None
    return Problem(
        "chain",
        "change",
        _entry(entry.seq),
        f"erasure of {entry.record_type} {entry.record_id} keeps hash {entry.erased_sha256}, "
        f"but entry #{before.seq} sealed it as {before.record_sha256}",
    )


def chain_verify(
    entries: Iterable[ChangeEntry],
    *,
    project: str,
    watch: int | None = None,
    start: tuple[int, str] | None = None,
) -> ChainReport:
    """Verifies entries read in seq order: each against its hash, its seq and its link; keeps
    the hash of the entry at seq ``watch``. ``start`` (size, head): the entries continue a
    log of that size and head (only the entries after it are read; their records' state is
    the one these entries give)."""
    report = ChainReport() if start is None else ChainReport(size=start[0], head=start[1])
    previous: ChangeEntry | None = None
    for entry in entries:
        own_ok = change_hash(project, *entry[:10]) == entry.hash
        if not own_ok:
            report.problems.append(
                Problem(
                    "chain",
                    "change",
                    _entry(entry.seq),
                    "its fields no longer match its hash (the entry was edited)",
                )
            )
        expected = report.size + 1
        if entry.seq < expected:
            report.problems.append(
                Problem(
                    "chain",
                    "change",
                    _entry(entry.seq),
                    f"a second entry #{entry.seq} (duplicated): only one is chained",
                )
            )
            continue
        if entry.seq > expected:
            missing = f"#{expected}" + (f"..#{entry.seq - 1}" if entry.seq - 1 > expected else "")
            report.problems.append(
                Problem("chain", "change", _entry(expected), f"entries {missing} are missing")
            )
        elif entry.prev_hash != report.head:
            report.problems.append(_link_problem(entry, previous, own_ok))
        key = (entry.record_type, entry.record_id)
        if entry.action == ERASED:
            tombstone = _tombstone_problem(entry, report.state.get(key))
            if tombstone is not None:
                report.problems.append(tombstone)
            report.erased.append(entry)
        report.state[key] = entry
        report.size, report.head, previous = entry.seq, entry.hash, entry
        if entry.seq == watch:
            report.watched_hash = entry.hash
    return report


def head_verify(report: ChainReport, *, size: int, head: str) -> None:
    """Compares the chain's end with the head the project's revision row keeps."""
    if report.size == size and report.head == head:
        return
    if report.size < size:
        reason = (
            f"the log ends at entry #{report.size} but the head says #{size}: "
            "entries after it were removed"
        )
    elif report.size > size:
        reason = (
            f"the log goes on to entry #{report.size} past the head (#{size}): entries were "
            "appended behind the service's back, or the head was reset"
        )
    else:
        reason = f"entry #{size} is not the head: the log was rewritten up to its end"
    report.problems.append(Problem("head", "change", _entry(size), reason))


def checkpoint_verify(report: ChainReport, *, size: int, head: str) -> None:
    """Prefix consistency: the checkpointed head must still be the entry at its seq (watched
    by ``chain_verify``)."""
    report.checkpoint = (size, head)
    if size == 0:
        consistent = head == GENESIS_HASH
        reason = "an empty log's head is the genesis hash"
    elif size > report.size:
        consistent = False
        reason = (
            f"the log holds {report.size} entries, fewer than the {size} checkpointed: "
            "entries were removed since"
        )
    else:
        consistent = report.watched_hash == head
        reason = (
            f"entry #{size} is no longer the checkpointed head: the log was rewritten at or "
            "before it since the checkpoint"
        )
    report.checkpoint_consistent = consistent
    if not consistent:
        report.problems.append(Problem("checkpoint", "change", _entry(size), reason))


def records_verify(
    found: Mapping[Key, FoundRecord], state: Mapping[Key, ChangeEntry], *, revision: int
) -> tuple[list[Problem], list[Key]]:
    """Compares the records found with the state the log gives them. Answers the problems
    and the records the log never sealed (the caller tells duplicates from other inserts)."""
    problems: list[Problem] = []
    unsealed: list[Key] = []
    for key, record in found.items():
        entry = state.get(key)
        if entry is None:
            unsealed.append(key)
            continue
        same = record.sha256 == entry.record_sha256 and record.index_problem is None
        if same and (record.revision is None or entry.revision <= record.revision <= revision):
            continue  # the usual case, first
        if record.stored_matches and record.sha256 != entry.record_sha256:
            problems.append(
                Problem(
                    "rewritten",
                    *key,
                    f"differs from its last sealed change (entry #{entry.seq}, {entry.action}); "
                    "its own stored hash was recomputed or it has none",
                )
            )
        if record.index_problem is not None:
            problems.append(Problem("index", *key, record.index_problem))
        if record.revision is not None and not entry.revision <= record.revision <= revision:
            problems.append(
                Problem(
                    "revision",
                    *key,
                    f"its revision {record.revision} is outside {entry.revision}..{revision} "
                    f"(its last change, entry #{entry.seq}, to the project's revision)",
                )
            )
    if len(found) - len(unsealed) == len(state):
        return problems, unsealed  # every sealed record was found
    for key, entry in state.items():
        if key not in found:
            problems.append(
                Problem(
                    "deleted",
                    *key,
                    f"sealed by entry #{entry.seq} ({entry.action}) but no longer in its table",
                )
            )
    return problems, unsealed


def unsealed_problems(
    unsealed: Iterable[Key], originals: Mapping[Key, Key | None]
) -> list[Problem]:
    """Problems for records the log never sealed: a copy of another record under a new id
    (``originals`` maps it to that record) or a row inserted behind the service's back."""
    problems = []
    for key in unsealed:
        original = originals.get(key)
        if original is not None:
            problems.append(
                Problem(
                    "duplicated",
                    *key,
                    f"a copy of {original[0]} {original[1]} under a new id, never sealed by "
                    "the change log",
                )
            )
        else:
            problems.append(
                Problem(
                    "inserted",
                    *key,
                    "not in the change log: written behind the service's back",
                )
            )
    return problems
