"""A project's graph held to the witness kept outside the database.

The witness holds the project's change-log head after every graph write's commit, and its
head, size and Merkle root at each checkpoint (memoryproject.witness). A database writer who
changes a fact and recomputes its row hash, every later change-log entry and the head leaves
a graph that verifies against itself; it no longer holds the entry the witness signed at the
witnessed size. The graph must:

- still hold the entry at the newest witnessed size, with its witnessed hash (the chain's
  hashes commit to every entry before it), and be no shorter;
- when nothing was written since a witnessed checkpoint, have its witnessed Merkle root.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_app.contracts.integrity import IntegrityResult
from graph_app.models import GraphChange
from memoryproject.contracts import WitnessCheck
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.witness import graph_stream, witness


@dataclass(frozen=True)
class _Point:
    size: int
    head: str
    merkle_root: str
    label: str
    at: str


def _points(project: Project, stream: str) -> tuple[list[_Point], list[str], str]:
    found = witness()
    assert found is not None
    read = found.read(streams=(stream,))
    points = []
    for entry in read.of_kind("checkpoint"):
        graph = (entry.body.get("graph") or {}).get(project.slug)
        if isinstance(graph, dict) and graph.get("pk") == project.pk:
            points.append(
                _Point(
                    int(graph.get("size", 0)),
                    str(graph.get("head", "")),
                    str(graph.get("merkle_root", "")),
                    f"witness checkpoint {entry.n} ({entry.at})",
                    entry.at,
                )
            )
    head = read.heads.get(stream)
    if head is not None:
        points.append(_Point(head.seq, head.hash, "", f"the witnessed head ({head.at})", head.at))
    return points, list(read.problems), read.key_id


def graph_witness_check(project: Project, result: IntegrityResult) -> WitnessCheck:
    """The project's graph, as ``result`` found it, held to the witness."""
    try:
        if witness() is None:
            return WitnessCheck.unanchored("this graph")
        points, problems, key = _points(project, graph_stream(project.pk))
    except ApplicationError as exc:
        return WitnessCheck(state="failed", problems=[exc.message])
    size = result.chain.size
    newest = max(points, key=lambda p: p.size) if points else None
    if newest is not None and newest.size > 0:
        since = f"since {newest.label}"
        held = GraphChange.objects.filter(project=project, seq=newest.size)
        hashes = set(held.values_list("hash", flat=True))
        if not hashes:
            problems.append(
                f"the change log is shorter than witnessed: entry {newest.size} is gone ({since};"
                f" the database holds {size})"
            )
        elif hashes != {newest.head}:
            problems.append(
                f"change-log entry {newest.size} does not have the hash the witness holds: the "
                f"graph was rewritten ({since})"
            )
    roots = [p for p in points if p.merkle_root and p.size == size]
    if result.scope == "full" and roots and roots[-1].merkle_root != result.merkle_root:
        problems.append(
            f"the Merkle root differs from the one witnessed at size {size} ({roots[-1].label})"
        )
    return WitnessCheck.held(
        problems,
        newest=(newest.size, newest.at, newest.label) if newest else None,
        current=size,
        key_id=key,
    )


def integrity_witnessed(project: Project, result: IntegrityResult) -> IntegrityResult:
    """``result`` with the witness's verdict: not verified unless the witness agrees."""
    check = graph_witness_check(project, result)
    verified = result.verified and check.state == "verified"
    return result.model_copy(update={"witness": check, "verified": verified})
