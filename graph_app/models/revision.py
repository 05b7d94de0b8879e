"""A monotonically increasing change counter per project.

Every graph write bumps it inside its transaction and stamps the rows it touches with the new
value, so a cache holding revision N only needs the rows with ``revision > N``. Locking this row
also serialises the graph writers of one project, which is what keeps supersession chains linear.
"""

from __future__ import annotations

from django.db import models


class GraphRevision(models.Model):
    project = models.OneToOneField(
        "memoryproject.Project", on_delete=models.CASCADE, related_name="graph_revision"
    )
    revision = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.project_id}@{self.revision}"
