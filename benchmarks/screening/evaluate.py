"""The screening evaluation: how many probes screening stops (per family and language), how
much benign text it flags, which secret forms it masks, and how long it takes per 2 KB item.

A probe is stopped when screening flags at least one passage of it. A secret is masked when no
visible piece of it (six characters or more between invisible characters) is left in the
stored text. Time is the uncached work of one record (masking, then flagging what remains:
``text_mask`` and ``instructions_find`` called directly, never ``record_screen``'s cache) on
items of exactly 2,048 characters made of what memory holds (``data/hosts.toml``: engineering
notes, an LLM-tooling note, dialogue, some with dashes, quotes and accents outside ASCII): each
host as it is, and each probe and each secret of the split carried by a host on a line of its
own. Per item the best of RUNS runs; p50, p95 and max over the items.

Figures of 2026-12-03 (held-out split, 3 runs of ``manage.py screening_eval --json``
interleaved with the engine before the one-pass needle search, on a 2-core machine shared with
other work, so absolute times are noisy): 79/81 probes stopped, 0/46 benign flagged, 16/16
secrets masked; per 2 KB item p50 0.47 to 0.50 ms, p95 0.70 to 0.74 ms (the engine before:
p50 1.00 to 1.06 ms, p95 1.54 to 1.62 ms in the same runs; docs/benchmarks.md has the tune and
all splits). Tune split: 81/81, 0/34, 14/14.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from benchmarks.screening.corpus import Corpus, corpus_load, hosts_load
from benchmarks.stats import percentile
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


def _embedded(host: str, piece: str, at: int) -> str:
    """``piece`` on a line of its own in ``host``, after line ``at`` (wrapped around), placed
    so that it stays whole in the first ITEM_CHARS characters."""
    lines = host.split("\n")
    at %= len(lines)
    while at and len("\n".join(lines[:at])) + len(piece) + 2 > ITEM_CHARS:
        at -= 1
    return "\n".join([*lines[:at], piece, *lines[at:]])


def _items(corpus: Corpus) -> list[tuple[str, str]]:
    """The timed items, (kind, text), each ITEM_CHARS characters: every host text as it is,
    and every probe and every secret of the split carried by a host text on a line of its own;
    a text shorter than ITEM_CHARS goes on with the next host, a longer one is cut."""
    hosts = [h.text for h in hosts_load()]
    pieces = [("host", "", i) for i in range(len(hosts))]
    pieces += [("probe", p.text, i) for i, p in enumerate(corpus.probes)]
    pieces += [("secret", s.text, i) for i, s in enumerate(corpus.secrets)]
    items = []
    for kind, piece, i in pieces:
        host = hosts[i % len(hosts)]
        text = _embedded(host, piece, 7 * i + 3) if piece else host
        following = i + 1
        while len(text) < ITEM_CHARS:
            text += "\n\n" + hosts[following % len(hosts)]
            following += 1
        items.append((kind, text[:ITEM_CHARS]))
    return items


def _time_ms(items: list[tuple[str, str]]) -> dict[str, Any]:
    """The uncached work of screening each item (masking, then flagging what remains, as
    ``record_screen`` does for a text it has not screened before: neither call is cached), the
    best of RUNS runs per item; p50, p95 and max over the items."""
    per_item = []
    for _, item in items:
        best = float("inf")
        for _ in range(RUNS):
            start = time.perf_counter()
            masked, _counts = text_mask(item)
            instructions_find(masked, "text")
            best = min(best, time.perf_counter() - start)
        per_item.append(best * 1000)
    kinds = {kind: sum(k == kind for k, _ in items) for kind in ("host", "probe", "secret")}
    return {
        "p50_ms": round(statistics.median(per_item), 3),
        "p95_ms": round(percentile(per_item, 0.95), 3),
        "max_ms": round(max(per_item), 3),
        "items": len(per_item),
        "item_chars": ITEM_CHARS,
        "items_by_kind": kinds,
        "runs_per_item": RUNS,
    }


def _hosts_clean() -> dict[str, Any]:
    """Whether the host texts pass on their own (a flagged host would time a probe twice)."""
    hosts = hosts_load()
    flagged = [h.topic for h in hosts if _flagged(h.text)]
    masked = [h.topic for h in hosts if text_mask(h.text)[1]]
    return {"hosts": len(hosts), "flagged": flagged, "masked": masked}


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
        "timing_hosts": _hosts_clean(),
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
    kinds = timing["items_by_kind"]
    lines.append(
        f"{'time per 2 KB item':<28}p50 {timing['p50_ms']:.3f} ms, p95 {timing['p95_ms']:.3f} ms,"
        f" max {timing['max_ms']:.3f} ms"
    )
    lines.append(
        f"{'':<28}({timing['items']} items of {timing['item_chars']} characters: "
        f"{kinds['host']} notes and dialogue as they are, {kinds['probe']} carrying a probe, "
        f"{kinds['secret']} a secret; uncached, best of {timing['runs_per_item']} runs each)"
    )
    hosts = result["timing_hosts"]
    if hosts["flagged"] or hosts["masked"]:
        lines.append(
            f"{'':<28}host texts not clean: flagged {hosts['flagged']}, masked {hosts['masked']}"
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
        f"{100 * targets['benign_flagged']:.0f} % benign flagged, p50 per 2 KB item <= "
        f"{targets['p50_ms']} ms):"
        f" {'met' if targets['met'] else 'not met'}",
    ]
    return "\n".join(lines)
