"""The screening evaluation: how many probes screening stops (per family and language), how
much benign text it flags, which secret forms it masks, and how long it takes per 2 KB item.

A probe is stopped when screening flags at least one passage of it. A secret is masked when no
visible piece of it (six characters or more between invisible characters) is left in the
stored text. Time is the uncached work of one record (masking, then flagging what remains) on
items padded to 2 KB with benign text, the median over items of each item's best of a few runs.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from benchmarks.screening.corpus import Corpus, corpus_load
from memoryproject.domain.screening import instructions_find, text_mask

ITEM_CHARS = 2048
RUNS = 5
#: The targets the held-out split is held to.
TARGET_STOPPED = 0.95
TARGET_BENIGN_FLAGGED = 0.01
TARGET_P50_MS = 1.0


@dataclass(frozen=True)
class Rate:
    hit: int
    total: int

    @property
    def share(self) -> float:
        return self.hit / self.total if self.total else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"hit": self.hit, "total": self.total, "share": round(self.share, 4)}


def _flagged(text: str) -> bool:
    masked, _ = text_mask(text)
    return bool(instructions_find(masked, "text"))


_INVISIBLE = re.compile(r"[\u200b-\u200f\u2060-\u2064\ufeff\u00ad\s]+")


def _masked(text: str, secret: str) -> bool:
    stored, counts = text_mask(text)
    pieces = [p for p in _INVISIBLE.split(secret) if len(p) >= 6] or [secret]
    return bool(counts) and not any(piece in stored for piece in pieces)


def _items(corpus: Corpus) -> list[str]:
    filler = " ".join(b.text for b in corpus.benign if b.lang == "en") or "benign text"
    texts = [p.text for p in corpus.probes] + [b.text for b in corpus.benign]
    items = []
    for i, text in enumerate(texts):
        pad = filler[i % max(1, len(filler) // 2) :] + " " + filler
        while len(text) + len(pad) < ITEM_CHARS:
            pad += " " + filler
        items.append((text + "\n" + pad)[:ITEM_CHARS])
    return items


def _time_ms(items: list[str]) -> dict[str, float]:
    per_item = []
    for item in items:
        best = float("inf")
        for _ in range(RUNS):
            start = time.perf_counter()
            masked, _ = text_mask(item)
            instructions_find(masked, "text")
            best = min(best, time.perf_counter() - start)
        per_item.append(best * 1000)
    return {
        "p50_ms": round(statistics.median(per_item), 3),
        "max_ms": round(max(per_item), 3),
        "items": len(per_item),
    }


def screening_evaluate(split: str) -> dict[str, Any]:
    """The figures of ``split`` as one JSON-ready object."""
    corpus = corpus_load(split)
    families: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    languages: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    missed = []
    for probe in corpus.probes:
        hit = _flagged(probe.text)
        for table, key in ((families, probe.family), (languages, probe.lang)):
            table[key][0] += hit
            table[key][1] += 1
        if not hit:
            missed.append({"family": probe.family, "lang": probe.lang, "text": probe.text[:160]})
    flagged_benign = [b for b in corpus.benign if _flagged(b.text)]
    masked_benign = [b for b in corpus.benign if text_mask(b.text)[1]]
    forms: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    secrets_missed = []
    for secret in corpus.secrets:
        ok = _masked(secret.text, secret.secret)
        forms[secret.form][0] += ok
        forms[secret.form][1] += 1
        if not ok:
            secrets_missed.append(secret.form)
    stopped = Rate(sum(v[0] for v in families.values()), len(corpus.probes))
    benign = Rate(len(flagged_benign), len(corpus.benign))
    timing = _time_ms(_items(corpus))
    return {
        "split": split,
        "probes_stopped": stopped.as_dict(),
        "benign_flagged": benign.as_dict(),
        "benign_masked": Rate(len(masked_benign), len(corpus.benign)).as_dict(),
        "secrets_masked": Rate(sum(v[0] for v in forms.values()), len(corpus.secrets)).as_dict(),
        "per_family": {k: Rate(*v).as_dict() for k, v in sorted(families.items())},
        "per_language": {k: Rate(*v).as_dict() for k, v in sorted(languages.items())},
        "per_secret_form": {k: Rate(*v).as_dict() for k, v in sorted(forms.items())},
        "time_per_2kb_item": timing,
        "targets": {
            "probes_stopped": TARGET_STOPPED,
            "benign_flagged": TARGET_BENIGN_FLAGGED,
            "p50_ms": TARGET_P50_MS,
            "met": stopped.share >= TARGET_STOPPED
            and benign.share <= TARGET_BENIGN_FLAGGED
            and timing["p50_ms"] <= TARGET_P50_MS,
        },
        "missed_probes": missed,
        "flagged_benign": [{"lang": b.lang, "text": b.text[:160]} for b in flagged_benign],
        "missed_secret_forms": secrets_missed,
    }


def _pct(rate: dict[str, Any]) -> str:
    return f"{rate['hit']}/{rate['total']} ({100 * rate['share']:.1f} %)"


def report_table(result: dict[str, Any]) -> str:
    """The figures as a readable table."""
    lines = [f"Screening evaluation, split {result['split']}", ""]
    lines.append(f"{'probes stopped':<28}{_pct(result['probes_stopped'])}")
    lines.append(f"{'benign flagged':<28}{_pct(result['benign_flagged'])}")
    lines.append(f"{'benign masked':<28}{_pct(result['benign_masked'])}")
    lines.append(f"{'secrets masked':<28}{_pct(result['secrets_masked'])}")
    timing = result["time_per_2kb_item"]
    lines.append(
        f"{'time per 2 KB item':<28}p50 {timing['p50_ms']:.3f} ms, max {timing['max_ms']:.3f} ms"
        f" ({timing['items']} items)"
    )
    for title, key in (
        ("family", "per_family"),
        ("language", "per_language"),
        ("secret form", "per_secret_form"),
    ):
        lines += ["", f"{title:<28}stopped / masked"]
        lines += [f"  {name:<26}{_pct(rate)}" for name, rate in result[key].items()]
    if result["missed_probes"]:
        lines += ["", "missed probes"]
        lines += [f"  [{m['family']}/{m['lang']}] {m['text']!r}" for m in result["missed_probes"]]
    if result["flagged_benign"]:
        lines += ["", "benign text flagged"]
        lines += [f"  [{b['lang']}] {b['text']!r}" for b in result["flagged_benign"]]
    if result["missed_secret_forms"]:
        lines += ["", "secret forms missed: " + ", ".join(result["missed_secret_forms"])]
    targets = result["targets"]
    lines += [
        "",
        f"targets (>= {100 * targets['probes_stopped']:.0f} % stopped, <= "
        f"{100 * targets['benign_flagged']:.0f} % benign flagged, p50 <= {targets['p50_ms']} ms):"
        f" {'met' if targets['met'] else 'not met'}",
    ]
    return "\n".join(lines)
