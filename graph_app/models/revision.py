"""A monotonically increasing change counter per project.

Every graph write bumps it inside its transaction and stamps the rows it touches with the new
value, so a cache holding revision N only needs the rows with ``revision > N``. Locking this row
also serialises the graph writers of one project, which is what keeps supersession chains linear.
The row also holds the head of the project's change log (its size and last hash), which
integrity verification compares the log with.
"""

from __future__ import annotations

from django.db import models

from memoryproject.domain.hash_chain import GENESIS_HASH


class GraphRevision(models.Model):
    project = models.OneToOneField(
        "memoryproject.Project", on_delete=models.CASCADE, related_name="graph_revision"
    )
    revision = models.BigIntegerField(default=0)
    changes = models.PositiveBigIntegerField(default=0)
    head_hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"Graph of {self.project.slug} at revision {self.revision}"
