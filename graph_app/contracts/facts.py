"""Inputs and outputs of facts: asserting one (with supersession), retracting it, reading it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from graph_app.contracts.fields import (
    QUARANTINED_FIELD,
    RECORD_ID_MAX,
    SCREENING_DESCRIPTION,
    TIMESTAMP,
    EntityId,
    EntityRef,
    EpisodeRef,
    Instant,
    ObjectValue,
    Predicate,
    RecordId,
    trimmed,
)
from memoryproject.contracts import Input, NoNul, Output, Unit, UtcDatetime
from memoryproject.errors import validation_error
from memoryproject.screening import ScreeningOut

#: What a fact is now: scheduled (valid from a future time), active (valid now, even when a
#: successor is due later), superseded or retracted.
FactStatus = Literal["scheduled", "active", "superseded", "retracted"]


class FactUpsertInput(Input):
    subject_id: Annotated[
        EntityId, Field(description="Entity id of the subject, e.g. auth_service.")
    ]
    predicate: Annotated[
        Predicate, Field(description="Relation name, one word, e.g. uses_token_format.")
    ]
    object_value: Annotated[
        ObjectValue | None,
        Field(
            description="The object as text, e.g. PASETO_v4_public. May be omitted when "
            "object_entity is given: the value is then the entity id."
        ),
    ] = None
    singular: Annotated[
        bool,
        Field(
            description="True: one current value per (subject, predicate); a new value closes "
            "and supersedes the active one. False for predicates with several values at once "
            "(e.g. depends_on)."
        ),
    ] = True
    valid_from: Annotated[
        Instant,
        Field(description=f"When the fact became true in the world (default now). {TIMESTAMP}"),
    ] = None
    source_episode: Annotated[
        EpisodeRef, Field(description="Id of the episode this fact comes from (ep_...).")
    ] = None
    object_entity: Annotated[
        EntityRef,
        Field(
            description="Entity id when the object is itself an entity (e.g. depends_on "
            "payment_ledger): makes the fact a graph edge that memory_query_entity and the "
            "compiler's 2-hop activation follow."
        ),
    ] = None
    confidence: Annotated[Unit, Field(description="How sure the source is, 0..1.")] = 1.0

    @model_validator(mode="after")
    def _has_object(self) -> FactUpsertInput:
        if not self.object_value and self.object_entity is None:
            raise validation_error("object_value", "must not be empty")
        return self

    @property
    def value(self) -> str:
        """The object's text: object_value, else the object entity's id."""
        return self.object_value or self.object_entity or ""


class FactRetractInput(Input):
    fact_id: Annotated[RecordId, Field(description="Id of the fact to retract (fact_...).")]
    at: Annotated[
        Instant, Field(description=f"When it stopped being true (default now). {TIMESTAMP}")
    ] = None


class FactGetInput(Input):
    fact_id: Annotated[
        str,
        trimmed(RECORD_ID_MAX + 10),
        NoNul,
        Field(description="The fact's id (fact_...) or its citation ([FACT:fact_...])."),
    ]


class FactOut(Output):
    omit_when_none = frozenset({"revision", "quarantined"})

    id: str
    project: str
    subject: str
    predicate: str
    object_value: str
    object_entity: str | None
    singular: bool
    confidence: float
    valid_from: UtcDatetime
    valid_until: UtcDatetime | None
    recorded_at: UtcDatetime
    closed_at: UtcDatetime | None
    superseded_by: str | None
    source_episode: str | None
    status: FactStatus
    sha256: str
    revision: int | None = Field(
        None, description="Graph revision of the fact's last change (absent in time travel)."
    )
    quarantined: list[str] | None = Field(None, description=QUARANTINED_FIELD)


class FactUpsertResult(Output):
    omit_when_none = frozenset({"screening"})

    fact: FactOut
    created: bool
    outcome: Literal["active", "history", "unchanged"] = Field(
        description="active: the new current truth; history: recorded as past (it starts "
        "before the current one); unchanged: identical to the active fact, nothing written."
    )
    superseded: list[FactOut] = Field(description="Facts this one closed and superseded.")
    screening: ScreeningOut | None = Field(None, description=SCREENING_DESCRIPTION)


class FactRetractResult(Output):
    fact: FactOut
    retracted: bool
