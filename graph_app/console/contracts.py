"""The memory browser's inputs, read from the query string of its pages.

The as-of controls are ``datetime-local`` inputs, which send a time without a zone; the page
labels them UTC, so a time without a zone is read as UTC. A time with a zone is taken as given.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BeforeValidator, Field

from memoryproject.contracts import AwareDatetime, Input


def _utc_when_naive(value: object) -> object:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return text  # the timestamp rule names what is wrong with it
        if parsed.tzinfo is None:
            return text + "+00:00"
    return value


#: A time from the browser's date-time controls: empty is "now", no zone is UTC.
ConsoleInstant = Annotated[AwareDatetime | None, BeforeValidator(_utc_when_naive)]
Page = Annotated[int, Field(ge=1, le=100_000)]


class EntityBrowseInput(Input):
    as_of: Annotated[
        ConsoleInstant, Field(description="Valid time: the entity as it was true then.")
    ] = None
    known_at: Annotated[
        ConsoleInstant,
        Field(description="Transaction time: only what had been recorded by then."),
    ] = None
    facts_page: Annotated[Page, Field(description="Page of the facts as of the date.")] = 1
    history_page: Annotated[Page, Field(description="Page of the fact history.")] = 1
    episodes_page: Annotated[Page, Field(description="Page of the episodes.")] = 1


class EntityListInput(Input):
    project: Annotated[
        str, Field(max_length=64, description="Project slug; empty for every project.")
    ] = ""
    q: Annotated[str, Field(max_length=200, description="Part of an entity id or name.")] = ""
    page: Annotated[Page, Field(description="Page of the list.")] = 1
