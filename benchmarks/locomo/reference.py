"""Reference retrievers measured beside the context compiler on the same LoCoMo lines and budget
(``manage.py locomo_eval --reference``).

Every reference ranks a conversation's turns and delivers the same lines the compiler's
episodes render (``[NOTE:D3:12] «Caroline (2023-05-08) | text``, read from the compiler's own
index of the conversation), so both are read by the same functions
(``benchmarks.locomo.reading``). What a reference ranks is each turn's recorded text with its
speaker (``Caroline: text``, the image description included as recorded); the three use
identical texts:

- ``bm25``: Okapi BM25 (rank-bm25's ``BM25Okapi`` with its default k1, b and epsilon) over
  lower-cased alphanumeric tokens.
- ``dense``: cosine similarity of all-MiniLM-L6-v2 sentence vectors
  (``graph_app.domain.semantic``) of the question and of each turn.
- ``hybrid``: reciprocal-rank fusion of the two, score ``1/(60 + rank_bm25) + 1/(60 + rank_dense)``
  (ranks from 1), ties kept in conversation order.

Packing is greedy best-first with full lines only: down the ranking, a line is added when it
still fits the budget and skipped otherwise, until every line was tried. The delivered text is
the chosen lines, best first, one per line, with no title: the whole budget goes to lines
(cl100k tokens of the whole text, as the compiler counts its own). A line is never cut or
previewed, so a reference's citation recall and full-evidence recall coincide.

A reference's time per question (``References.answer``) is end to end, what its caller waits
for: the question tokenised (and encoded alone, for dense and hybrid), every turn scored,
the turns ordered best first, packed under the budget and the text built. The index (BM25's
statistics, the turns' vectors) is built once per conversation and not timed, as the
compiler's is not.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_app.domain.index_items import IndexItem
from graph_app.index_cache import project_index
from graph_app.models import Episode
from memoryproject.models import Project
from memoryproject.tokens import count_tokens

REFERENCES = ("bm25", "dense", "hybrid")
RRF_K = 60
_WORD_RE = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """BM25's tokens: the lower-cased runs of ASCII letters and digits."""
    return _WORD_RE.findall(text.lower())


def reference_missing() -> str:
    """What the references need that is not installed ("" when nothing)."""
    from importlib.util import find_spec

    from graph_app.domain import semantic

    wanted = [] if find_spec("rank_bm25") else ["rank-bm25"]
    if not semantic.available():
        wanted.append(semantic.missing())
    return ", ".join(wanted)


@dataclass(frozen=True)
class Turns:
    """A conversation's turns in conversation order: episode id, delivered line, its tokens and
    the text the references rank."""

    ids: list[str]
    lines: list[str]
    tokens: list[int]
    texts: list[str]
    citations: list[str]


def conversation_lines(project: Project) -> Turns:
    """The lines the compiler's index renders for the project's episodes, with each turn's
    speaker and recorded text."""
    entry = project_index(project)
    with entry.lock:
        entry.refresh(project)
        items = [doc.payload for doc in entry.index.docs.values()]
    episodes = sorted(
        (i for i in items if isinstance(i, IndexItem) and i.kind == "episode"),
        key=lambda i: i.order,
    )
    recorded = {
        pk: f"{title}: {content}"
        for pk, title, content in Episode.objects.filter(project=project).values_list(
            "id", "title", "content"
        )
    }
    return Turns(
        ids=[i.id for i in episodes],
        lines=[i.line for i in episodes],
        tokens=[i.line_tokens if i.line_tokens >= 0 else count_tokens(i.line) for i in episodes],
        texts=[recorded[i.id] for i in episodes],
        citations=[i.citation for i in episodes],
    )


def best_first(scores: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Indexes by descending score, ties in conversation order."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def reciprocal_rank_fusion(
    orders: Sequence[np.ndarray[Any, Any]], *, k: int = RRF_K
) -> np.ndarray[Any, Any]:
    """The fused order of several rankings (each a best-first array of indexes): each index
    scores the sum of ``1 / (k + rank)`` over the rankings, ranks counted from 1."""
    fused = np.zeros(len(orders[0]), dtype=np.float64)
    for order in orders:
        ranks = np.empty(len(order), dtype=np.float64)
        ranks[order] = np.arange(1, len(order) + 1)
        fused += 1.0 / (k + ranks)
    return best_first(fused)


def pack_lines(
    order: Sequence[int], lines: Sequence[str], tokens: Sequence[int], budget: int
) -> list[int]:
    """Greedy best-first: the indexes, in ``order``, of the whole lines that fit ``budget``
    tokens joined by line breaks (a line that does not fit is skipped, the next one tried)."""
    chosen: list[int] = []
    used = 0
    for i in order:
        cost = tokens[i] + (1 if chosen else 0)  # the line break before it
        if used + cost <= budget:
            chosen.append(int(i))
            used += cost
    # Tokens may merge across a line break: the whole text is what must fit.
    while chosen and count_tokens("\n".join(lines[i] for i in chosen)) > budget:
        chosen.pop()
    return chosen


class References:
    """The three references over one conversation's turns."""

    def __init__(self, turns: Turns) -> None:
        from rank_bm25 import BM25Okapi

        from graph_app.domain.semantic import sentence_encoder

        self.turns = turns
        self.bm25 = BM25Okapi([words(t) for t in turns.texts])
        self.encoder = sentence_encoder()
        self.vectors = self.encoder.encode(turns.texts)

    def order(
        self, name: str, question: str, query: np.ndarray[Any, Any] | None = None
    ) -> np.ndarray[Any, Any]:
        """Reference ``name``'s best-first order of the turns for ``question``; the dense and
        hybrid ones encode the question unless its vector is given as ``query``."""
        if name == "bm25":
            return best_first(self.bm25.get_scores(words(question)))
        if query is None:
            query = self.encoder.encode([question])[0]
        dense = best_first(self.vectors @ query)
        if name == "dense":
            return dense
        return reciprocal_rank_fusion([self.order("bm25", question), dense])

    def delivered(self, order: np.ndarray[Any, Any], budget: int) -> dict[str, Any]:
        """What a reference delivers for a ranking, read as a compile's answer is (markdown
        and cited episode items)."""
        t = self.turns
        chosen = pack_lines(order.tolist(), t.lines, t.tokens, budget)
        return {
            "markdown": "\n".join(t.lines[i] for i in chosen),
            "items": [
                {"kind": "episode", "id": t.ids[i], "citation": t.citations[i], "truncated": False}
                for i in chosen
            ],
        }

    def answer(self, name: str, question: str, budget: int) -> tuple[dict[str, Any], float]:
        """Reference ``name``'s answer to one question and the milliseconds a caller waits for
        it, end to end: the question tokenised (and encoded, for dense and hybrid), the turns
        scored and ordered best first, packed under ``budget`` and the text built."""
        start = time.perf_counter()
        result = self.delivered(self.order(name, question), budget)
        return result, (time.perf_counter() - start) * 1000


def reference_table(report: dict[str, Any]) -> list[str]:
    """The compiler beside the references, overall, and its margin over the hybrid."""
    header = (
        f"{'retriever':<12}{'recall_all':>12}{'full_all':>10}{'full_any':>10}"
        f"{'answer':>8}{'tokens':>8}"
    )
    rows = [("ours", report["overall"])] + [
        (name, report["references"][name]["overall"]) for name in REFERENCES
    ]
    lines = [
        f"Beside the references at {report['budget']} tokens, profile {report['profile']} "
        f"(same lines; {report['overall']['questions']} questions)",
        header,
        "-" * len(header),
    ]
    for name, r in rows:
        lines.append(
            f"{name:<12}{r['recall_all']:>12.3f}{r['full_all']:>10.3f}{r['full_any']:>10.3f}"
            f"{r['answer_contained']:>8.3f}{r['tokens_mean']:>8.0f}"
        )
    margin = report["margin_vs_hybrid"]
    lines.append(
        f"ours - hybrid: full_all {margin['full_all']:+.3f}, "
        f"answer_contained {margin['answer_contained']:+.3f}"
    )
    timing = report["timing"]
    ours, bm25 = timing["ours"], timing["bm25"]
    lines.append(
        f"compile p50 ours {ours['p50_ms']:.2f} ms, bm25 reference {bm25['p50_ms']:.2f} ms: "
        f"{timing['ratio_p50']:.1f}x (p95 ours {ours['p95_ms']:.2f} ms, "
        f"bm25 {bm25['p95_ms']:.2f} ms: {timing['ratio_p95']:.1f}x); "
        f"dense p50 {timing['dense']['p50_ms']:.2f} ms, "
        f"hybrid {timing['hybrid']['p50_ms']:.2f} ms (per question, end to end)"
    )
    return lines
