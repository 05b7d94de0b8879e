"""Inputs and outputs of entities: the entity write (``entity_upsert``, whose answer adds what
screening masked and flagged to the entity as every read answers it, ``EntityOut``) and the
entity query with its ego graph."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from graph_app.contracts.episodes import EpisodeOut
from graph_app.contracts.facts import FactOut
from graph_app.contracts.fields import (
    ENTITY_ID_MAX,
    ENTITY_ID_RE,
    ENTITY_PAGE,
    MAX_HOPS,
    SCREENING_DESCRIPTION,
    Aliases,
    EntityId,
    Kind,
    Name,
    TextBool,
    page_limit,
    page_offset,
)
from memoryproject.contracts import Input, Output, UtcDatetime
from memoryproject.screening import ScreeningOut


class EntityUpsertInput(Input):
    entity_id: Annotated[EntityId, Field(description="Entity id, e.g. payment_ledger.")]
    kind: Annotated[
        Kind | None,
        Field(description="service, module, file, library, person, ... (unchanged if omitted)."),
    ] = None
    name: Annotated[Name | None, Field(description="Display name (unchanged if omitted).")] = None
    aliases: Annotated[
        Aliases | None, Field(description="Other names (replace the stored ones).")
    ] = None


class EntityQueryInput(Input):
    entity_id: Annotated[
        str,
        Field(
            min_length=1,
            max_length=ENTITY_ID_MAX,
            description="Entity id, e.g. payment_ledger.",
            json_schema_extra={"pattern": ENTITY_ID_RE.pattern},
        ),
    ]
    max_hops: Annotated[
        int, Field(ge=0, le=MAX_HOPS, description="Ego-graph radius over active edges.")
    ] = 2
    include_superseded: Annotated[
        TextBool,
        Field(
            description="Also list the history (superseded and retracted facts) and scheduled "
            "facts among facts; both are always answered on their own."
        ),
    ] = False
    limit: Annotated[
        int,
        page_limit(
            ENTITY_PAGE,
            "Page size of each list (facts, history, scheduled, episodes, the ego graph's nodes "
            "and edges), 1 to {max}.",
        ),
    ] = ENTITY_PAGE[0]
    offset: Annotated[int, page_offset("Items of each list to skip (next_offset).")] = 0


class EntityOut(Output):
    id: str
    kind: str
    name: str
    aliases: list[str]
    created_at: UtcDatetime


class EntityUpsertResult(EntityOut):
    omit_when_none = frozenset({"screening"})

    screening: ScreeningOut | None = Field(None, description=SCREENING_DESCRIPTION)


class EgoNode(Output):
    id: str
    kind: str
    hops: int


class EgoEdge(Output):
    fact_id: str
    source: str
    predicate: str
    target: str


class EgoGraph(Output):
    max_hops: int
    nodes: list[EgoNode] = Field(
        description="By hops, then id; in an entity query, a page of them like its lists."
    )
    edges: list[EgoEdge] = Field(
        description="By the hops of their ends, then fact id; paged like the nodes."
    )


class EntityQueryResult(Output):
    entity: EntityOut
    facts: list[FactOut] = Field(
        description="Facts valid now (with history and scheduled facts if asked)."
    )
    history: list[FactOut] = Field(description="Superseded and retracted facts.")
    scheduled: list[FactOut] = Field(
        default_factory=list,
        description="Facts valid from a future time: they take over when their time comes.",
    )
    episodes: list[EpisodeOut] = Field(
        description="Episodes that mention the entity or are the source of its facts."
    )
    ego_graph: EgoGraph
    totals: dict[str, int] = Field(
        default_factory=dict,
        description="Items in each list (facts, history, scheduled, episodes, and the ego "
        "graph's nodes and edges) over all pages.",
    )
    next_offset: int | None = Field(
        default=None, description="The offset of the next page when a list has more, else null."
    )
