"""Temporal facts: (subject, predicate, object) with valid time and transaction time.

Valid time is ``[valid_from, valid_until)`` (open while ``valid_until`` is null: the active
fact). Transaction time is ``recorded_at`` (when the fact was learned) and ``closed_at`` (when
its closure was learned), so the graph can be read as it was known at any moment. Facts are
never deleted; a superseded one points at its successor. A fact whose object is an entity is an
edge of the graph.

Rows referenced by other rows (a fact's subject, its successor, its source episode) cannot be
deleted on their own (RESTRICT), so history cannot lose a link; deleting a whole project still
removes its graph in one go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from django.db import models
from django.db.models import Q

from graph_app.domain.supersession import Status, fact_status
from memoryproject.timeutil import utcnow

if TYPE_CHECKING:
    from graph_app.models.entities import Entity
    from graph_app.models.episodes import Episode

    _M = TypeVar("_M", bound=models.Model)
    #: An optional link to a row of model ``_M``.
    _Link: TypeAlias = models.ForeignKey[_M | None, _M | None]


def _optional_link(to: str, related_name: str) -> Any:
    """An optional link to a row that cannot be deleted while it is linked (RESTRICT)."""
    return models.ForeignKey(
        to, on_delete=models.RESTRICT, null=True, blank=True, related_name=related_name
    )


class TemporalFact(models.Model):
    id = models.CharField(primary_key=True, max_length=40)
    project = models.ForeignKey(
        "memoryproject.Project", on_delete=models.CASCADE, related_name="facts"
    )
    subject = models.ForeignKey("graph_app.Entity", on_delete=models.RESTRICT, related_name="facts")
    predicate = models.CharField(max_length=128)
    object_value = models.TextField()
    object_entity: _Link[Entity] = _optional_link("graph_app.Entity", "incoming_facts")
    singular = models.BooleanField(default=True)
    confidence = models.FloatField(default=1.0)
    valid_from = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    superseded_by: _Link[TemporalFact] = _optional_link("self", "supersedes")
    source_episode: _Link[Episode] = _optional_link("graph_app.Episode", "facts")
    sha256 = models.CharField(max_length=64)
    revision = models.BigIntegerField(db_index=True)

    class Meta:
        ordering = ["recorded_at", "id"]
        constraints = [
            # A superseded fact held for some time: a successor starting at the same instant
            # is refused (retraction may close a fact where it starts: it never held).
            models.CheckConstraint(
                condition=Q(valid_until__isnull=True)
                | Q(superseded_by__isnull=True)
                | Q(valid_until__gt=models.F("valid_from")),
                name="graph_fact_superseded_not_zero_width",
            ),
            # Concurrent writers can never leave two active truths for one singular predicate.
            models.UniqueConstraint(
                fields=["project", "subject", "predicate"],
                condition=Q(valid_until__isnull=True, singular=True),
                name="graph_fact_one_active_singular",
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0.0) & Q(confidence__lte=1.0),
                name="graph_fact_confidence_range",
            ),
        ]
        indexes = [
            models.Index(fields=["project", "subject", "predicate"], name="graph_fact_spo"),
            models.Index(fields=["project", "revision"], name="graph_fact_proj_rev"),
            models.Index(fields=["project", "valid_until"], name="graph_fact_proj_open"),
        ]

    def __str__(self) -> str:
        # "payments-service · uses_token_format = jwt"
        value = self.object_value if len(self.object_value) <= 60 else self.object_value[:59] + "…"
        return f"{self.subject.slug} · {self.predicate} = {value}"

    @property
    def status(self) -> Status:
        """What the fact is now (see graph_app.domain.supersession.fact_status)."""
        return fact_status(
            valid_from=self.valid_from,
            valid_until=self.valid_until,
            superseded=self.superseded_by_id is not None,
            at=utcnow(),
        )
