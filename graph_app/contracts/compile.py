"""Input and output of the context compiler (``memory_compile_context``, ``POST
/v1/graph/compile``): the one definition of its arguments, their defaults and bounds, and of
its answer."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from memoryproject.contracts import (
    AwareDatetime,
    BlankIsNone,
    Input,
    Output,
    RequiredText,
    UtcDatetime,
)
from memoryproject.domain.screening import text_mask
from memoryproject.screening import QUARANTINED_DESCRIPTION, QuarantinedOut

TIMESTAMP_FORMAT = "ISO-8601 with a timezone, e.g. 2026-04-20T09:30:00Z."
QUERY_MAX_CHARS = 4_000


def _query_masked(query: str) -> str:
    """The query with its secrets masked (``[masked:<kind>]``), once, as it is parsed: the
    compile, its receipt's request (and so an export) never hold them."""
    return text_mask(query)[0]


class CompileInput(Input):
    query: Annotated[
        RequiredText,
        Field(
            max_length=QUERY_MAX_CHARS,
            description="The task or question the agent is about to work on, in words and "
            "identifiers. Secrets in it are masked ([masked:<kind>]) before it is compiled or "
            "receipted.",
        ),
        AfterValidator(_query_masked),
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
    profile: Annotated[
        Literal["code", "dialogue"],
        Field(
            description="How the query is read. `code` (default): every word but English stop "
            'words counts ("what kind of cache", "return type"). `dialogue`, for memory made '
            'of conversation turns: chat fillers and question scaffolding ("what kind of", '
            '"how many times", "did ... mention") are dropped too, and each word also reads as '
            'the words of the memory nearest to it in meaning ("countries" finds "Spain"). '
            "Packing: `code` gives 35 % of the budget to whole lines and shows the rest as "
            "previews (best-matching sentences, `truncated`) so more sources fit; `dialogue` "
            "gives the whole budget to whole lines, previews only filling what no further whole "
            "line fits."
        ),
    ] = "code"
    order: Annotated[
        Literal["layout", "relevance"],
        Field(
            description="Order of `items`: `layout` (default) follows the markdown (facts, "
            "then episodes by day); `relevance` lists the most relevant first. The markdown "
            "keeps its layout either way."
        ),
    ] = "layout"
    with_proofs: Annotated[
        bool,
        Field(
            description="Also answer `proofs`: a citation bundle with each item's full "
            "record, SHA-256 and RFC 6962 inclusion proof against the graph's (signed) Merkle "
            "root, which `manage.py verify_sources` checks offline. Reads every record of the "
            "project, so ask only when the citations must be provable."
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


class InclusionProof(Output):
    """RFC 6962 inclusion proof of one record in the tree of ``tree_size`` records."""

    leaf_index: int = Field(description="The record's position: facts by id, then episodes.")
    tree_size: int
    audit_path: list[str] = Field(
        description="Sibling hashes (hex) from the leaf up to the root (RFC 6962 §2.1.1)."
    )


class RootSignature(Output):
    algorithm: Literal["HMAC-SHA256"] = "HMAC-SHA256"
    key: str = Field(
        "AUDIT_CHECKPOINT_KEY", description="The setting holding the key (as for checkpoints)."
    )
    hmac: str = Field(
        description="HMAC-SHA256 (hex) of the RFC 8785 JSON of project, revision, tree_size, "
        "root and time."
    )


class SignedRoot(Output):
    """The graph's Merkle root when the bundle was made: the one integrity verification
    computes over every fact and episode."""

    project: str
    revision: int
    tree_size: int = Field(description="Records in the tree (facts, then episodes, by id).")
    root: str = Field(description="RFC 6962 Merkle Tree Hash (hex).")
    time: str = Field(description="When the root was read (ISO-8601 UTC).")
    signed: bool = Field(description="False when no AUDIT_CHECKPOINT_KEY is set.")
    signature: RootSignature | None


class SourceItem(Output):
    """One compiled source with what proves it belonged to the memory at the root."""

    id: str
    kind: Literal["fact", "episode"]
    citation: str
    text: str = Field(
        description="The record's full canonical content: its RFC 8785 JSON, the Merkle leaf."
    )
    valid_from: str | None = Field(description="A fact's; an episode's occurred_at.")
    valid_until: str | None = Field(description="A fact's end of validity; null for episodes.")
    recorded_at: str | None
    sha256: str = Field(description="SHA-256 (hex) of `text`.")
    proof: InclusionProof


class SourceBundle(Output):
    """A verifiable citation bundle (schema ``memory-citation-bundle/1``)."""

    format: Literal["memory-citation-bundle/1"] = "memory-citation-bundle/1"
    project: str
    query: str
    root: SignedRoot
    items: list[SourceItem]


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
    quarantined: list[QuarantinedOut] = Field(
        default_factory=list, description=QUARANTINED_DESCRIPTION
    )
    injection_id: int | None = Field(
        None, description="The receipt of this delivery in the injection log (REST and MCP)."
    )
    proofs: SourceBundle | None = Field(
        None, description="The citation bundle, when asked for `with_proofs`."
    )

    omit_when_none = frozenset({"injection_id", "proofs"})
