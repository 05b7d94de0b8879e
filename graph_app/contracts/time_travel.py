"""Input and output of time travel: the facts true at a time, as known at a time."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from graph_app.contracts.facts import FactOut
from graph_app.contracts.fields import (
    TIME_TRAVEL_PAGE,
    TIMESTAMP,
    Instant,
    page_limit,
    page_offset,
)
from memoryproject.contracts import AwareDatetime, Input, Output, UtcDatetime


class TimeTravelInput(Input):
    as_of: Annotated[
        AwareDatetime, Field(description=f"Valid time: the facts true at this time. {TIMESTAMP}")
    ]
    known_at: Annotated[
        Instant,
        Field(
            description="Transaction time: only what had been recorded by then, as it was then "
            f"known (default now). {TIMESTAMP}"
        ),
    ] = None
    limit: Annotated[
        int,
        page_limit(
            TIME_TRAVEL_PAGE, "Page size, 1 to {max}; count and snapshot_hash cover every fact."
        ),
    ] = TIME_TRAVEL_PAGE[0]
    offset: Annotated[int, page_offset("Facts to skip, by id (next_offset).")] = 0


class TimeTravelResult(Output):
    project: str
    as_of: UtcDatetime
    known_at: UtcDatetime
    count: int
    snapshot_hash: str = Field(description="RFC 6962 Merkle root over the facts as then known.")
    facts: list[FactOut] = Field(description="This page of the facts, by id.")
    next_offset: int | None = Field(
        default=None, description="The offset of the next page when there is one, else null."
    )
