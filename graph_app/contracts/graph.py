"""Inputs and outputs of the knowledge graph: facts, retractions, episodes, entities, the entity
query, time travel and integrity.

Every bound and rule of a graph write lives here, once: the services, the REST views, the MCP
tools and the OpenAPI schema all read these models. Text is stripped of surrounding white space
before its bounds are checked, as it is stored.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, model_validator

from graph_app.domain.hashing import canonical_json
from memoryproject.contracts import (
    MAX_OFFSET,
    AwareDatetime,
    BlankIsNone,
    Input,
    NoNul,
    Output,
    Unit,
    UtcDatetime,
    WitnessCheck,
    has_nul,
    parse_bool,
    rule_error,
)
from memoryproject.errors import validation_error
from memoryproject.screening import ScreeningOut

ENTITY_ID_MAX = 128
ENTITY_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@+#-]*$")
ENTITY_ID_RULE = (
    "letters, digits and _ . : / @ + # -, starting with a letter or digit, "
    f"at most {ENTITY_ID_MAX} characters"
)
ENTITY_KIND_MAX = 32
RECORD_ID_MAX = 40
PREDICATE_MAX = 128
OBJECT_VALUE_MAX = 2_000
TITLE_MAX = 300
CONTENT_MAX = 50_000
FILES_MAX = 200
FILE_PATH_MAX = 500
ENTITIES_MENTIONED_MAX = 200
EXTERNAL_ID_MAX = 200
METADATA_MAX_CHARS = 10_000
NAME_MAX = 200
ALIASES_MAX = 50
MAX_HOPS = 5
#: Page sizes of the entity query (per list) and of time travel: default and maximum.
ENTITY_PAGE = (100, 500)
TIME_TRAVEL_PAGE = (500, 1000)
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")
TIMESTAMP = "ISO-8601 with a timezone, e.g. 2026-04-20T09:30:00Z."

#: The episode categories (graph_app.models.EpisodeCategory stores the same values).
Category = Literal["adr", "bug_root_cause", "invariant", "session_note", "migration", "incident"]
#: What a fact is now: scheduled (valid from a future time), active (valid now, even when a
#: successor is due later), superseded or retracted.
FactStatus = Literal["scheduled", "active", "superseded", "retracted"]


# --- field types ------------------------------------------------------------------------------

# The house NUL rule, applied after stripping and bounds so that their errors keep the house
# wording.
_NO_NUL = NoNul


def _trimmed(max_length: int) -> StringConstraints:
    return StringConstraints(strip_whitespace=True, min_length=1, max_length=max_length)


def _entity_id(value: str) -> str:
    if not ENTITY_ID_RE.match(value):
        raise rule_error(f"'{value[:60]}' is not an entity id; use {ENTITY_ID_RULE}")
    return value


def _one_word(value: str) -> str:
    if CONTROL_CHARS.search(value) or " " in value:
        raise rule_error("must be one word without spaces (e.g. depends_on)")
    return value


def _printable(value: str) -> str:
    # Line breaks and tabs are part of a value's text; other control characters are not.
    if CONTROL_CHARS.search(value.replace("\n", "").replace("\t", "")):
        raise rule_error("must not contain control characters")
    return value


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _plain_json(value: dict[str, Any]) -> dict[str, Any]:
    try:
        size = len(canonical_json(value))
    except Exception as exc:  # the canonicaliser rejects NaN, huge integers and the like
        raise rule_error(f"must be plain JSON ({exc})") from None
    if size > METADATA_MAX_CHARS:
        raise rule_error(f"must be at most {METADATA_MAX_CHARS} bytes of JSON, got {size}")
    if has_nul(value):
        raise rule_error("must not contain NUL characters")
    return value


def _sha256(value: str) -> str:
    if not SHA256_RE.match(value):
        raise rule_error("must be a SHA-256: 64 hexadecimal digits")
    return value.lower()


def _text_bool(value: object) -> object:
    return parse_bool(value) if isinstance(value, str) else value


EntityId = Annotated[
    str,
    _trimmed(ENTITY_ID_MAX),
    AfterValidator(_entity_id),
    Field(json_schema_extra={"pattern": ENTITY_ID_RE.pattern}),
]
RecordId = Annotated[str, _trimmed(RECORD_ID_MAX), _NO_NUL]
Predicate = Annotated[str, _trimmed(PREDICATE_MAX), AfterValidator(_one_word)]
ObjectValue = Annotated[
    str,
    StringConstraints(strip_whitespace=True, max_length=OBJECT_VALUE_MAX),
    AfterValidator(_printable),
]
Title = Annotated[str, _trimmed(TITLE_MAX), _NO_NUL]
Content = Annotated[str, _trimmed(CONTENT_MAX), _NO_NUL]
FilePath = Annotated[str, _trimmed(FILE_PATH_MAX), _NO_NUL]
ExternalId = Annotated[str, _trimmed(EXTERNAL_ID_MAX), _NO_NUL]
#: Optional references and ids, where "" is the same as none.
EpisodeRef = Annotated[RecordId | None, BlankIsNone]
EntityRef = Annotated[EntityId | None, BlankIsNone]
OwnId = Annotated[ExternalId | None, BlankIsNone]
Kind = Annotated[str, _trimmed(ENTITY_KIND_MAX), _NO_NUL]
Name = Annotated[str, _trimmed(NAME_MAX), _NO_NUL]
Alias = Annotated[str, _trimmed(ENTITY_ID_MAX), _NO_NUL]
Aliases = Annotated[list[Alias], Field(max_length=ALIASES_MAX), AfterValidator(_unique)]
Metadata = Annotated[dict[str, Any], AfterValidator(_plain_json)]
#: A hex SHA-256, read in lower case.
Sha256 = Annotated[
    str,
    StringConstraints(strip_whitespace=True),
    AfterValidator(_sha256),
    Field(json_schema_extra={"pattern": SHA256_RE.pattern}),
]
#: A boolean that may come as query-string text, read by the one text rule (parse_bool).
TextBool = Annotated[bool, BeforeValidator(_text_bool)]
#: An optional timestamp ("" is the same as none).
Instant = Annotated[AwareDatetime | None, BlankIsNone]


# --- inputs -----------------------------------------------------------------------------------


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
        AfterValidator(_unique),
    ] = []
    entities_mentioned: Annotated[
        list[EntityId],
        Field(
            max_length=ENTITIES_MENTIONED_MAX,
            description="Entity ids (slugs such as auth_service) it is about; created on first "
            "mention and linked.",
        ),
        AfterValidator(_unique),
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
        Field(
            ge=1,
            le=ENTITY_PAGE[1],
            description="Page size of each list (facts, history, scheduled, episodes, the ego "
            f"graph's nodes and edges), 1 to {ENTITY_PAGE[1]}.",
        ),
    ] = ENTITY_PAGE[0]
    offset: Annotated[
        int, Field(ge=0, le=MAX_OFFSET, description="Items of each list to skip (next_offset).")
    ] = 0


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
        Field(
            ge=1,
            le=TIME_TRAVEL_PAGE[1],
            description=f"Page size, 1 to {TIME_TRAVEL_PAGE[1]}; count and snapshot_hash cover "
            "every fact.",
        ),
    ] = TIME_TRAVEL_PAGE[0]
    offset: Annotated[
        int, Field(ge=0, le=MAX_OFFSET, description="Facts to skip, by id (next_offset).")
    ] = 0


class IntegrityInput(Input):
    """The whole project is verified; give a checkpoint's (size, head) of the project's change
    log to prove that the log still extends it."""

    checkpoint_size: Annotated[
        int | None,
        Field(
            ge=0,
            le=2**53,
            description="Size of the project's graph change log at a checkpoint (with "
            "checkpoint_head): entries up to it must be unchanged.",
        ),
    ] = None
    checkpoint_head: Annotated[
        Sha256 | None,
        Field(description="Hash of the change log's entry at checkpoint_size (hex SHA-256)."),
    ] = None
    since_checkpoint: Annotated[
        TextBool,
        Field(
            description="Verify only what changed since the checkpoint: the log's entries "
            "after it (chained from its head up to the project's head) and the records they "
            "touched. Needs checkpoint_size and checkpoint_head; answers no merkle_root. A "
            "full verification (the default) also covers the records and entries before it."
        ),
    ] = False

    @model_validator(mode="after")
    def _both_or_neither(self) -> IntegrityInput:
        if (self.checkpoint_size is None) != (self.checkpoint_head is None):
            missing = "checkpoint_head" if self.checkpoint_head is None else "checkpoint_size"
            raise validation_error(missing, "is required with the other checkpoint field")
        if self.since_checkpoint and self.checkpoint_size is None:
            raise validation_error("since_checkpoint", "needs checkpoint_size and checkpoint_head")
        return self


class FactGetInput(Input):
    fact_id: Annotated[
        str,
        _trimmed(RECORD_ID_MAX + 10),
        _NO_NUL,
        Field(description="The fact's id (fact_...) or its citation ([FACT:fact_...])."),
    ]


class EpisodeGetInput(Input):
    episode_id: Annotated[
        str,
        _trimmed(EXTERNAL_ID_MAX + 40),
        _NO_NUL,
        Field(
            description="The episode's id (ep_...), its own external_id, or its citation as a "
            "bundle shows it ([ADR:ADR-12])."
        ),
    ]


# --- outputs ----------------------------------------------------------------------------------


#: A record read's mark on an item screening flagged (its text fields are then withheld).
QUARANTINED_FIELD = (
    "Present when screening flagged the item: why ('field: kind (rule)'). Its recorded text "
    "is then withheld until a reviewer releases it (docs/spotlighting.md)."
)


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


class EntityOut(Output):
    id: str
    kind: str
    name: str
    aliases: list[str]
    created_at: UtcDatetime


#: The write answers' report of what screening masked and flagged.
SCREENING_DESCRIPTION = (
    "What screening did before the write: secrets masked (field, kind, count; never the "
    "secret) and instruction-like passages flagged (field, kind, rule, passage)."
)


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


class EpisodeRecordResult(EpisodeOut):
    omit_when_none = frozenset({"screening", "quarantined"})

    created: bool = Field(description="False when the same external_id was already recorded.")
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


class Mismatch(Output):
    kind: Literal["fact", "episode"]
    id: str
    stored: str
    computed: str


class IntegrityProblem(Output):
    # Text rather than an enum: the schema already names a "kind" enum (Mismatch's).
    kind: str = Field(
        description="mismatch: content no longer matches the row's stored hash; rewritten: "
        "differs from its last sealed change though its own hash agrees; index: an episode's "
        "file rows or entity links differ from what it recorded; revision: its revision stamp "
        "contradicts the log; deleted / inserted / duplicated: a record gone, never sealed, or "
        "a copy under a new id; chain / head / checkpoint: the change log itself is broken."
    )
    record_type: Literal["fact", "episode", "entity", "change"]
    id: str = Field(description="The record's id, or the change log entry's seq.")
    reason: str


class ChainState(Output):
    size: int = Field(description="Entries in the project's graph change log.")
    head: str = Field(description="Hash of the last entry (the genesis hash when empty).")


class CheckpointCheck(Output):
    size: int
    head: str
    consistent: bool = Field(description="The checkpointed head is still the entry at size.")


class ErasedRecord(Output):
    record_type: Literal["fact", "episode", "entity"]
    id: str
    erased_at: UtcDatetime
    sha256: str = Field(description="The hash the record had before its content was erased.")
    reason: str
    seq: int = Field(description="The change log entry that records the erasure.")


class IntegrityResult(Output):
    project: str
    verified: bool
    facts: int
    episodes: int
    records: int
    merkle_root: str = Field(
        description="RFC 6962 Merkle root over every fact and episode (empty when only the "
        "changes since a checkpoint were verified)."
    )
    mismatched_ids: list[str] = Field(description="Every fact, episode or entity named below.")
    mismatches: list[Mismatch]
    checked_at: UtcDatetime
    entities: int = 0
    problems: list[IntegrityProblem] = []
    chain: ChainState = ChainState(size=0, head="0" * 64)
    checkpoint: CheckpointCheck | None = None
    erased: list[ErasedRecord] = []
    scope: Literal["full", "since_checkpoint"] = Field(
        default="full",
        description="full: every record and the whole log; since_checkpoint: the log after "
        "the checkpoint and the records it touched (facts, episodes and entities count those).",
    )
    witness: WitnessCheck | None = Field(
        default=None, description="The graph held to the witness kept outside the database."
    )


class FactCounts(Output):
    total: int
    active: int = Field(description="Valid now.")
    scheduled: int = Field(description="Valid from a future time.")
    superseded: int
    retracted: int


class EpisodeCounts(Output):
    total: int
    by_category: dict[str, int]


class GraphSummary(Output):
    project: str
    revision: int
    entities: int
    facts: FactCounts
    episodes: EpisodeCounts
    merkle_root: str
    verified: bool
    mismatched_ids: list[str]


class EpisodePreview(EpisodeOut):
    content_truncated: bool


class RecentEpisodes(Output):
    project: str
    count: int
    episodes: list[EpisodePreview]


class _Page(Output):
    """One page of a list (limit/offset): ``next`` and ``previous`` are the pages' URLs."""

    count: int
    next: str | None
    previous: str | None


class FactPage(_Page):
    results: list[FactOut]


class EpisodePage(_Page):
    results: list[EpisodeOut]


class EntityPage(_Page):
    results: list[EntityOut]
