"""Input and output of the context compiler (``memory_compile_context``, ``POST
/v1/graph/compile``): the one definition of its arguments, their defaults and bounds, and of
its answer."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from memoryproject.contracts import (
    AwareDatetime,
    BlankIsNone,
    Input,
    Output,
    RequiredText,
    UtcDatetime,
)

TIMESTAMP_FORMAT = "ISO-8601 with a timezone, e.g. 2026-04-20T09:30:00Z."
QUERY_MAX_CHARS = 4_000


class CompileInput(Input):
    query: Annotated[
        RequiredText,
        Field(
            max_length=QUERY_MAX_CHARS,
            description="The task or question the agent is about to work on, in words and "
            "identifiers.",
        ),
    ]
    max_tokens: Annotated[
        int,
        Field(
            ge=64,
            le=32000,
            description="Token budget of the bundle (cl100k); the markdown never exceeds it.",
        ),
    ] = 1200
    as_of: Annotated[
        AwareDatetime | None,
        BlankIsNone,
        Field(
            description="Valid time: compile the facts that were true at this time (default: "
            f"known_at, else now). {TIMESTAMP_FORMAT}"
        ),
    ] = None
    known_at: Annotated[
        AwareDatetime | None,
        BlankIsNone,
        Field(
            description="Transaction time: compile only what had been recorded by this time, "
            f"as it was then known (default now). {TIMESTAMP_FORMAT}"
        ),
    ] = None
    include_superseded: Annotated[
        bool,
        Field(
            description="Also include facts that are no longer current (superseded or "
            "retracted), each line showing its valid_until and status; none is then counted "
            "in suppressed_stale."
        ),
    ] = False


class CompiledItem(Output):
    """One source that made it into the bundle."""

    kind: Literal["fact", "episode"] = Field(
        description="What the source is: a fact or an episode (its category shows in the "
        "citation, e.g. [ADR:...])."
    )
    id: str
    external_id: str | None = Field(
        description="The episode's own id when it has one (cited by it); null for facts."
    )
    score: float = Field(description="Relevance to the query (higher ranks first).")
    tokens: int = Field(description="Tokens the source's line takes in the markdown.")
    citation: str
    truncated: bool = Field(description="Shown as a preview, cut to fit the budget.")
    sha256: str = Field(
        description="Content hash of the source as delivered (a fact's as then known): the "
        "receipt records it, so an auditor can tell whether the source changed since."
    )
    open_finding: int | None = Field(
        None,
        description="A fact that an open contradiction finding names: its id. The line shows "
        "[CONFLICT:#id] so the conflict is seen, not one side of it.",
    )

    omit_when_none = frozenset({"open_finding"})


class CompileResult(Output):
    project: str
    query: str
    markdown: str = Field(description="The context bundle; every line cites its source.")
    token_count: int = Field(description="Tokens of `markdown` (cl100k), never above max_tokens.")
    max_tokens: int
    as_of: UtcDatetime | None
    known_at: UtcDatetime | None
    include_superseded: bool
    revision: int = Field(description="Graph revision the bundle was compiled from.")
    items: list[CompiledItem]
    citations: list[str]
    suppressed_stale: int = Field(description="Superseded or retracted facts left out.")
    injection_id: int | None = Field(
        None, description="The receipt of this delivery in the injection log (REST and MCP)."
    )

    omit_when_none = frozenset({"injection_id"})
