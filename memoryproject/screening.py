"""What a write's answer says about screening: the secrets masked and the passages flagged.

The rules live in ``memoryproject.domain.screening`` and its ``screening_*`` modules, and what a
write screens in ``memoryproject.domain.field_screening``; this is the typed output every write
(traces, session summaries, episodes, facts, entities) answers under ``screening``, and
``write_screened``, the one call a write service makes before it stores anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from memoryproject.contracts import Output
from memoryproject.domain.field_screening import write_screen
from memoryproject.domain.screening import Flag, Masked, Screening
from memoryproject.domain.spotlight import Quarantined
from memoryproject.errors import validation_error

#: How a field path names where a secret or a passage was (the fields' descriptions say it).
FIELD_PATHS = (
    "The field path: a field (content), an item of a list (files_touched[1]), a value of an "
    "object (metadata.db.password), or, ending in #key, the key itself (metadata.ci."
    "[masked:github_token]#key: that key held a GitHub token; keys are stored masked, and two "
    "keys of one object that mask alike are told apart by ~2, ~3...)."
)


class MaskedOut(Output):
    field: str = Field(description=f"Where the secret was. {FIELD_PATHS}")
    kind: str = Field(
        description="private_key, jwt, github_token, slack_token, stripe_key, google_api_key, "
        "aws_access_key, aws_secret_key, vault_token, digitalocean_token, npm_token, "
        "sendgrid_key, gitlab_token, openai_key, pypi_token, discord_token, telegram_token, "
        "twilio_key, mailchimp_key, square_secret, password_in_url, password or credential."
    )
    count: int


class FlaggedOut(Output):
    field: str = Field(description=f"Where the passage is. {FIELD_PATHS}")
    kind: Literal["override", "exfiltration", "tool_call"]
    rule: str = Field(description="What the passage attempts.")
    passage: str = Field(description="The passage, quoted (at most about 120 characters).")


class ScreeningOut(Output):
    masked: list[MaskedOut] = Field(
        description="Secrets replaced by [masked:<kind>] before the write, in every text "
        "field it stores, list items and object keys included; never the secret. A secret in "
        "an identifier (an entity id, subject, predicate, object entity, mentioned entity or "
        "external id) is never masked: the write is refused (400, naming the field) instead."
    )
    flagged: list[FlaggedOut] = Field(
        description="Instruction-like passages: kept, but they lower trust and are never "
        "injected automatically."
    )


def screening_out(
    screening: Screening | None = None,
    *,
    masked: tuple[Masked, ...] | list[Masked] = (),
    flagged: tuple[Flag, ...] | list[Flag] = (),
) -> ScreeningOut:
    """The answer's ``screening`` from a record's screening (or its parts)."""
    if screening is not None:
        masked, flagged = screening.masked, screening.flagged
    return ScreeningOut(
        masked=[MaskedOut(**m.as_dict()) for m in masked],
        flagged=[FlaggedOut(**f.as_dict()) for f in flagged],  # type: ignore[arg-type]
    )


class QuarantinedOut(Output):
    """A flagged item a delivery held back: what it is and why, never its text."""

    kind: str = Field(description="trace, summary, fact or episode.")
    id: str = Field(description="The item's id as the service made it.")
    reasons: list[str] = Field(
        description="Why screening flagged it: 'field: kind (rule)', never the passage."
    )


QUARANTINED_DESCRIPTION = (
    "Flagged items left out of this delivery (ids and reasons, never their text); a reviewer "
    "may release one from the review queue. See docs/spotlighting.md."
)


def quarantined_out(item: Quarantined) -> QuarantinedOut:
    return QuarantinedOut(kind=item.kind, id=item.id, reasons=list(item.reasons))


def write_screened(fields: Mapping[str, Any], ids: Mapping[str, Any] | None = None) -> Screening:
    """Screens a write before anything is stored: ``fields`` answered masked (keys included)
    with what was masked and flagged; a secret in one of the ``ids`` refuses the write, naming
    the field and the rule (``subject_id: must not hold a secret (github_token)``)."""
    screened = write_screen(fields, ids)
    if screened.refused:
        refusal = screened.refused[0]
        raise validation_error(refusal.field, refusal.rule)
    return screened.screening
