"""The graph summary: a project's facts by status, episodes by category, entities and revision,
with the integrity result over every record.
"""

from __future__ import annotations

from django.db.models import Count, Q

from graph_app.contracts.summary import EpisodeCounts, FactCounts, GraphSummary
from graph_app.graph_head import graph_head
from graph_app.integrity import integrity_verify
from graph_app.models import Entity, Episode, EpisodeCategory, TemporalFact
from graph_app.visibility import fact_visible
from memoryproject.models import Project
from memoryproject.timeutil import utcnow


def graph_summary(*, project: Project) -> GraphSummary:
    """Counts of the project's graph (facts by status, episodes by category), its revision and
    the integrity result with the Merkle root over every record."""
    integrity = integrity_verify(project=project)
    now = utcnow()
    facts = TemporalFact.objects.filter(project=project).aggregate(
        active=Count("id", filter=fact_visible(now)),
        scheduled=Count("id", filter=Q(valid_from__gt=now)),
        superseded=Count("id", filter=Q(valid_until__lte=now, superseded_by__isnull=False)),
        retracted=Count("id", filter=Q(valid_until__lte=now, superseded_by__isnull=True)),
    )
    by_category = dict.fromkeys(EpisodeCategory.values, 0)
    for row in (
        Episode.objects.filter(project=project)
        .values("category")
        .annotate(n=Count("id"))
        .order_by()
    ):
        by_category[row["category"]] = row["n"]
    return GraphSummary(
        project=project.slug,
        revision=graph_head(project).revision,
        entities=Entity.objects.filter(project=project).count(),
        facts=FactCounts(total=integrity.facts, **facts),
        episodes=EpisodeCounts(total=integrity.episodes, by_category=by_category),
        merkle_root=integrity.merkle_root,
        verified=integrity.verified,
        mismatched_ids=integrity.mismatched_ids,
    )
