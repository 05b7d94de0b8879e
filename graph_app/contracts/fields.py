"""The bounds and field types of the knowledge graph's records, and the descriptions its
outputs share: facts, episodes and entities are each checked by these, once.

Text is stripped of surrounding white space before its bounds are checked, as it is stored.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from memoryproject.contracts import (
    MAX_OFFSET,
    AwareDatetime,
    BlankIsNone,
    NoNul,
    has_nul,
    parse_bool,
    rule_error,
)
from memoryproject.domain.canonical import canonical_json

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


# --- field types ------------------------------------------------------------------------------

# The house NUL rule, applied after stripping and bounds so that their errors keep the house
# wording.
_NO_NUL = NoNul


def trimmed(max_length: int) -> StringConstraints:
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


def page_limit(page: tuple[int, int], description: str) -> Any:
    """The ``limit`` field of a paged read: a page size from 1 to the ``page``'s maximum
    (``page`` is its default and maximum), which ``{max}`` in ``description`` stands for."""
    return Field(ge=1, le=page[1], description=description.format(max=page[1]))


def page_offset(description: str) -> Any:
    """The ``offset`` field of a paged read: the items to skip, 0 to MAX_OFFSET."""
    return Field(ge=0, le=MAX_OFFSET, description=description)


def unique(items: list[str]) -> list[str]:
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
    trimmed(ENTITY_ID_MAX),
    AfterValidator(_entity_id),
    Field(json_schema_extra={"pattern": ENTITY_ID_RE.pattern}),
]
RecordId = Annotated[str, trimmed(RECORD_ID_MAX), _NO_NUL]
Predicate = Annotated[str, trimmed(PREDICATE_MAX), AfterValidator(_one_word)]
ObjectValue = Annotated[
    str,
    StringConstraints(strip_whitespace=True, max_length=OBJECT_VALUE_MAX),
    AfterValidator(_printable),
]
Title = Annotated[str, trimmed(TITLE_MAX), _NO_NUL]
Content = Annotated[str, trimmed(CONTENT_MAX), _NO_NUL]
FilePath = Annotated[str, trimmed(FILE_PATH_MAX), _NO_NUL]
ExternalId = Annotated[str, trimmed(EXTERNAL_ID_MAX), _NO_NUL]
#: Optional references and ids, where "" is the same as none.
EpisodeRef = Annotated[RecordId | None, BlankIsNone]
EntityRef = Annotated[EntityId | None, BlankIsNone]
OwnId = Annotated[ExternalId | None, BlankIsNone]
Kind = Annotated[str, trimmed(ENTITY_KIND_MAX), _NO_NUL]
Name = Annotated[str, trimmed(NAME_MAX), _NO_NUL]
Alias = Annotated[str, trimmed(ENTITY_ID_MAX), _NO_NUL]
Aliases = Annotated[list[Alias], Field(max_length=ALIASES_MAX), AfterValidator(unique)]
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


#: A record read's mark on an item screening flagged (its text fields are then withheld).
QUARANTINED_FIELD = (
    "Present when screening flagged the item: why ('field: kind (rule)'). Its recorded text "
    "is then withheld until a reviewer releases it (docs/spotlighting.md)."
)

#: The write answers' report of what screening masked and flagged.
SCREENING_DESCRIPTION = (
    "What screening did before the write: secrets masked (field, kind, count; never the "
    "secret) and instruction-like passages flagged (field, kind, rule, passage)."
)
