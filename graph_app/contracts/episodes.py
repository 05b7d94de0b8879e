"""Inputs and outputs of episodes: recording one, reading it, the recent ones."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from graph_app.contracts.fields import (
    ENTITIES_MENTIONED_MAX,
    EXTERNAL_ID_MAX,
    FILES_MAX,
    METADATA_MAX_CHARS,
    QUARANTINED_FIELD,
    SCREENING_DESCRIPTION,
    TIMESTAMP,
    Content,
    EntityId,
    FilePath,
    Instant,
    Metadata,
    OwnId,
    Title,
    trimmed,
    unique,
)
from memoryproject.contracts import Input, NoNul, Output, UtcDatetime
from memoryproject.screening import ScreeningOut

#: The episode categories (graph_app.models.EpisodeCategory stores the same values).
Category = Literal["adr", "bug_root_cause", "invariant", "session_note", "migration", "incident"]


class EpisodeRecordInput(Input):
    title: Annotated[Title, Field(description="One-line title.")]
    category: Annotated[
        Category,
        Field(description="adr, bug_root_cause, invariant, session_note, migration or incident."),
    ]
    content: Annotated[Content, Field(description="The knowledge itself, in prose or markdown.")]
    files_touched: Annotated[
        list[FilePath],
        Field(max_length=FILES_MAX, description="Repository paths the episode concerns."),
        AfterValidator(unique),
    ] = []
    entities_mentioned: Annotated[
        list[EntityId],
        Field(
            max_length=ENTITIES_MENTIONED_MAX,
            description="Entity ids (slugs such as auth_service) it is about; created on first "
            "mention and linked.",
        ),
        AfterValidator(unique),
    ] = []
    occurred_at: Annotated[
        Instant, Field(description=f"When it happened (default now). {TIMESTAMP}")
    ] = None
    external_id: Annotated[
        OwnId,
        Field(
            description="Your own id for it, unique per project: recording it again with the "
            "same content answers the stored episode."
        ),
    ] = None
    metadata: Annotated[
        Metadata | None,
        Field(
            description='Any JSON object, e.g. {"speaker": "...", "session": "..."}; part of '
            f"the hash. At most {METADATA_MAX_CHARS} bytes of canonical JSON."
        ),
    ] = None


class EpisodeGetInput(Input):
    episode_id: Annotated[
        str,
        trimmed(EXTERNAL_ID_MAX + 40),
        NoNul,
        Field(
            description="The episode's id (ep_...), its own external_id, or its citation as a "
            "bundle shows it ([ADR:ADR-12])."
        ),
    ]


class EpisodeOut(Output):
    omit_when_none = frozenset({"quarantined"})

    id: str
    project: str
    category: Category
    title: str
    content: str
    files_touched: list[str]
    entities_mentioned: list[str]
    metadata: dict[str, Any]
    occurred_at: UtcDatetime
    recorded_at: UtcDatetime
    external_id: str | None
    sha256: str
    revision: int
    quarantined: list[str] | None = Field(None, description=QUARANTINED_FIELD)


class EpisodeRecordResult(EpisodeOut):
    omit_when_none = frozenset({"screening", "quarantined"})

    created: bool = Field(description="False when the same external_id was already recorded.")
    screening: ScreeningOut | None = Field(None, description=SCREENING_DESCRIPTION)


class EpisodePreview(EpisodeOut):
    content_truncated: bool


class RecentEpisodes(Output):
    project: str
    count: int
    episodes: list[EpisodePreview]
