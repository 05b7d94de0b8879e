"""The graph's change log: one append-only, hash-chained entry per graph write, per project.

Every write (a fact asserted or closed, an episode recorded, an entity created or changed, a
record erased) appends, inside its own transaction and under the project's graph lock, one
entry per record it touched: the record's SHA-256 after the change (its canonical form,
``graph_app.domain.records``), the revision, and ``prev_hash`` linking it to the entry before.
The project's ``GraphRevision`` keeps the head (size and last hash). Integrity verification
replays the log and compares the tables with it as a set, so a row deleted, inserted, duplicated
or rewritten (even with its own hash recomputed) is named, and a checkpoint's (size, head)
proves that no entry up to it was changed since.

Why a chain rather than an RFC 6962 tree with a signed root stored per revision: the graph's
rows are mutable (a fact is closed later, an entity renamed), so what must be proved is the
sequence of changes, not a set of leaves. A chain orders the changes, names the exact entry
that broke (its fields against its hash, its ``prev_hash`` against its predecessor), gives each
record its expected current state (the hash of its last change), and anchors to a checkpoint by
two numbers, (size, head hash): the checkpointed head must still be the entry at that seq. A
tree per revision would need its root recomputed over the whole graph on every write, or an
incremental tree kept beside the rows, and would still say only that some leaf differs. The
graph's Merkle root over all records stays in the integrity answer as a snapshot hash.

Append-only at every level, as the injection log is (the base class, error and maintenance
gate of ``memoryproject.append_only``): ``save()`` of a stored entry and ``delete()`` raise, the
queryset refuses ``update()`` and ``delete()``, and database triggers (migration 0004) reject
UPDATE, DELETE and TRUNCATE unless ``audit_maintenance()`` holds the gate open in the same
transaction. Entries outlive their project (no foreign-key constraint): deleting a project
removes its graph, not the record of what it held.
"""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.db import models

from memoryproject.append_only import AppendOnlyModel


class ChangeAction(models.TextChoices):
    ASSERTED = "asserted", "fact asserted"
    CLOSED = "closed", "fact closed (superseded, retracted or cancelled)"
    RECORDED = "recorded", "episode recorded"
    CREATED = "created", "entity created"
    CHANGED = "changed", "entity changed"
    ERASED = "erased", "content erased"
    BASELINE = "baseline", "sealed as found when the change log began"


class RecordType(models.TextChoices):
    FACT = "fact"
    EPISODE = "episode"
    ENTITY = "entity"


class GraphChange(AppendOnlyModel):
    # No database constraint: the log of a deleted project stays (ids are never reused).
    project = models.ForeignKey(
        "memoryproject.Project",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # the unique (project, seq) index serves it
        related_name="graph_changes",
    )
    seq = models.PositiveBigIntegerField()
    revision = models.BigIntegerField()
    action = models.CharField(max_length=16, choices=ChangeAction.choices)
    record_type = models.CharField(max_length=8, choices=RecordType.choices)
    record_id = models.CharField(max_length=128)
    record_sha256 = models.CharField(max_length=64)
    erased_sha256 = models.CharField(max_length=64, blank=True)
    note = models.TextField(blank=True)
    recorded_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["project_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["project", "seq"], name="graph_change_unique_seq")
        ]
        indexes = [
            models.Index(fields=["project", "record_type", "record_id"], name="graph_change_record")
        ]

    def __str__(self) -> str:
        # The log outlives a deleted project (no database constraint): say so, not fail.
        try:
            where = self.project.slug
        except ObjectDoesNotExist:
            where = f"deleted project {self.project_id}"
        return (
            f"Change #{self.seq} in {where}: {self.get_action_display()} "
            f"({self.record_type} {self.record_id})"
        )
