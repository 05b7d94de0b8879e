"""Input and output of integrity verification: the records' hashes, the change log's chain,
a checkpoint it must extend, the erasures it lists and the witness."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from graph_app.contracts.fields import Sha256, TextBool
from memoryproject.contracts import Input, Output, UtcDatetime, WitnessCheck
from memoryproject.errors import validation_error


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
