"""The dashboard's series, from the rows the database aggregated: one value per day of the
period (days without deliveries count zero), the share of ESCALATE decisions per day and the
trust-score histogram in ten buckets of 0.1. Pure: rows in, plain lists out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta

BUCKETS = 10
STATUSES = ("injected", "flagged", "empty")


def day_range(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def bucket_labels() -> list[str]:
    return [f"{n / BUCKETS:.1f}-{(n + 1) / BUCKETS:.1f}" for n in range(BUCKETS)]


@dataclass(frozen=True)
class DaySeries:
    """Deliveries per day by status, and the share of ESCALATE among each day's deliveries
    (None on a day without any)."""

    days: list[date]
    by_status: dict[str, list[int]]
    escalate_share: list[float | None]
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.totals.values())


def day_series(rows: Iterable[Mapping[str, object]], first: date, last: date) -> DaySeries:
    """``rows``: {"day", "status", "n", "escalate"} per day and status."""
    days = day_range(first, last)
    index = {day: n for n, day in enumerate(days)}
    statuses = list(STATUSES)
    by_status: dict[str, list[int]] = {s: [0] * len(days) for s in statuses}
    escalate = [0] * len(days)
    for row in rows:
        day, status = row["day"], str(row["status"])
        if not isinstance(day, date) or day not in index:
            continue
        if status not in by_status:
            by_status[status] = [0] * len(days)
        by_status[status][index[day]] += int(row["n"])  # type: ignore[call-overload]
        escalate[index[day]] += int(row["escalate"])  # type: ignore[call-overload]
    per_day = [sum(counts[n] for counts in by_status.values()) for n in range(len(days))]
    share = [round(escalate[n] / per_day[n], 4) if per_day[n] else None for n in range(len(days))]
    totals = {status: sum(counts) for status, counts in by_status.items()}
    return DaySeries(days=days, by_status=by_status, escalate_share=share, totals=totals)


def histogram(rows: Iterable[tuple[object, int]]) -> list[int]:
    """``rows``: (bucket, count) with bucket = floor(score * 10), 1.0 folded into the last."""
    counts = [0] * BUCKETS
    for bucket, n in rows:
        if bucket is None:
            continue
        position = min(max(int(float(bucket)), 0), BUCKETS - 1)  # type: ignore[arg-type]
        counts[position] += int(n)
    return counts
