"""The answer of an entity write (``entity_upsert``): the entity as stored and what screening
masked and flagged in it. Apart from ``graph_app.contracts.graph`` so that the entity's own
output (``EntityOut``) stays the one every read answers."""

from __future__ import annotations

from pydantic import Field

from graph_app.contracts.graph import SCREENING_DESCRIPTION, EntityOut
from memoryproject.screening import ScreeningOut


class EntityUpsertResult(EntityOut):
    omit_when_none = frozenset({"screening"})

    screening: ScreeningOut | None = Field(None, description=SCREENING_DESCRIPTION)
