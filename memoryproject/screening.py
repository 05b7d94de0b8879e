"""What a write's answer says about screening: the secrets masked and the passages flagged.

The rules live in ``memoryproject.domain.screening`` and its ``screening_*`` modules; this is
the typed output every write that screens (traces, session summaries, episodes, facts) answers
under ``screening``. Pure pydantic.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memoryproject.contracts import Output
from memoryproject.domain.screening import Flag, Masked, Screening


class MaskedOut(Output):
    field: str = Field(description="Where the secret was, e.g. metadata.db.password.")
    kind: str = Field(
        description="private_key, jwt, github_token, slack_token, stripe_key, google_api_key, "
        "aws_access_key, aws_secret_key, vault_token, digitalocean_token, npm_token, "
        "sendgrid_key, gitlab_token, openai_key, pypi_token, discord_token, telegram_token, "
        "twilio_key, mailchimp_key, square_secret, password_in_url, password or credential."
    )
    count: int


class FlaggedOut(Output):
    field: str
    kind: Literal["override", "exfiltration", "tool_call"]
    rule: str = Field(description="What the passage attempts.")
    passage: str = Field(description="The passage, quoted (at most about 120 characters).")


class ScreeningOut(Output):
    masked: list[MaskedOut] = Field(
        description="Secrets replaced by [masked:<kind>] before the write; never the secret."
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
