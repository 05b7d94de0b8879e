"""Reads of the dashboard: every aggregate is computed by the database (GROUP BY), one query
per chart whatever the number of records, then shaped by ``audit_app.domain.dashboard``.

Deliveries are the receipts of plans, loads, compiles and prompts (events of the log are not
deliveries); the period runs from midnight UTC ``days - 1`` days ago to now. The chain status is
the console banner's (``chain_status``: verified now, nothing cached, from the latest signed
checkpoint to the head or over the newest records only), read by its own request
(``dashboard_chain``) because it reads records one by one while the aggregates do not."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.db.models import Count, F, Q, QuerySet, Value
from django.db.models.functions import Floor, Least, TruncDate

from audit_app.domain.dashboard import DaySeries, bucket_labels, day_series, histogram
from audit_app.injection_log import SOURCES
from audit_app.models import ContradictionFinding, FindingState, InjectionRecord, Review
from memoryproject.entitlements import key_prefixes_hidden
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

PERIODS = (7, 30, 90)
TOP_CLIENTS = 10


@dataclass(frozen=True)
class Dashboard:
    days: int
    project: Project | None
    since: datetime
    until: datetime
    series: DaySeries
    trust_labels: list[str]
    trust_counts: list[int]
    top_clients: list[tuple[str, int]]
    open_reviews: int
    open_findings: int

    def chart_data(self) -> dict[str, object]:
        """What the charts draw (embedded in the page with ``json_script``)."""
        return {
            "days": [day.isoformat() for day in self.series.days],
            "by_status": self.series.by_status,
            "escalate_share": self.series.escalate_share,
            "trust": {"labels": self.trust_labels, "counts": self.trust_counts},
            "clients": {
                "labels": [client or "(none)" for client, _ in self.top_clients],
                "counts": [n for _, n in self.top_clients],
            },
            "totals": {
                **self.series.totals,
                "deliveries": self.series.total,
                "open_reviews": self.open_reviews,
                "open_findings": self.open_findings,
            },
        }


def deliveries(*, since: datetime, project: Project | None) -> QuerySet[InjectionRecord]:
    rows = InjectionRecord.objects.filter(source__in=SOURCES, created_at__gte=since)
    return rows if project is None else rows.filter(project=project)


def dashboard_read(*, days: int, project: Project | None, key_prefixes: bool) -> Dashboard:
    """The dashboard over the last ``days`` days (7, 30 or 90), for one project or all; the top
    clients that are API keys name their prefix only with ``key_prefixes`` (the reader may view
    API keys), else it is masked (two keys of one name then show as two rows alike)."""
    until = utcnow()
    first = until.date() - timedelta(days=days - 1)
    since = datetime.combine(first, time.min, tzinfo=UTC)
    rows = deliveries(since=since, project=project).order_by()
    per_day = (
        rows.annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day", "status")
        .annotate(n=Count("id"), escalate=Count("id", filter=Q(decision="ESCALATE")))
    )
    buckets = (
        rows.exclude(status="empty")
        .annotate(bucket=Least(Floor(F("trust_score") * 10.0), Value(9.0)))
        .values_list("bucket")
        .annotate(n=Count("id"))
    )
    clients = (
        rows.values_list("client").annotate(n=Count("id")).order_by("-n", "client")[:TOP_CLIENTS]
    )
    reviews = Review.objects.filter(state="open")
    findings = ContradictionFinding.objects.filter(state=FindingState.OPEN)
    if project is not None:
        reviews, findings = reviews.filter(project=project), findings.filter(project=project)
    return Dashboard(
        days=days,
        project=project,
        since=since,
        until=until,
        series=day_series(list(per_day), first, until.date()),
        trust_labels=bucket_labels(),
        trust_counts=histogram(list(buckets)),
        top_clients=[
            (str(client) if key_prefixes else key_prefixes_hidden(str(client)), int(n))
            for client, n in clients
        ],
        open_reviews=reviews.count(),
        open_findings=findings.count(),
    )
