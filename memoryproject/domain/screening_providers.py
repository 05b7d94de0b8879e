"""The provider token formats secret screening takes from detect-secrets, and the text each
one's match holds (its needles).

The formats are the compiled patterns detect-secrets' regex plugins keep in their ``denylist``;
nothing else of the library is called (``screening_secrets`` says why). The library is imported
when a text is first screened for secrets or a server warms its rules (``detect_secrets_import``),
with ``requests`` deferred: the library imports it to verify a token over the network, which is
never asked of it, and loading it would double the import's cost (about 90 ms of a server's
start-up here, with ``urllib3`` and ``charset_normalizer``).
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from types import ModuleType

from memoryproject.domain.imports import imports_deferred

#: detect-secrets' plugins whose formats are secret rules: (module, class, kind).
PROVIDERS = (
    ("sendgrid", "SendGridDetector", "sendgrid_key"),
    ("gitlab_token", "GitLabTokenDetector", "gitlab_token"),
    ("openai", "OpenAIDetector", "openai_key"),
    ("pypi_token", "PypiTokenDetector", "pypi_token"),
    ("discord", "DiscordBotTokenDetector", "discord_token"),
    ("telegram_token", "TelegramBotTokenDetector", "telegram_token"),
    ("twilio", "TwilioKeyDetector", "twilio_key"),
    ("mailchimp", "MailchimpDetector", "mailchimp_key"),
    ("square_oauth", "SquareOAuthDetector", "square_secret"),
)

#: Lower-case text a match of the kind holds (kinds not named: no such text).
PROVIDER_NEEDLES = {
    "sendgrid_key": ("sg.",),
    "gitlab_token": ("gl", "gr1348941"),
    "openai_key": ("t3blbkfj",),
    "pypi_token": ("pypi-",),
    "mailchimp_key": ("-us",),
    "square_secret": ("sq0csp-",),
}


def provider_patterns() -> list[tuple[str, str]]:
    """(kind, regular expression) of every provider format, in the plugins' order."""
    found: list[tuple[str, str]] = []
    for module, name, kind in PROVIDERS:
        plugin = getattr(detect_secrets_import(f"plugins.{module}"), name)
        found.extend((kind, pattern.pattern) for pattern in plugin.denylist)
    return found


@cache
def detect_secrets_import(module: str) -> ModuleType:
    """``detect_secrets.<module>``, imported the first time with ``requests`` deferred, then
    found in a dictionary (screening asks for its heuristics at every candidate secret)."""
    with imports_deferred("requests"):
        return import_module(f"detect_secrets.{module}")
