"""The provider token formats secret screening takes from detect-secrets, and the text each
one's match holds (its needles).

The formats are the compiled patterns detect-secrets' regex plugins keep in their ``denylist``;
nothing else of the library is called (``screening_secrets`` says why). The library is imported
(with ``requests``, about 30 ms) when a text is first screened for secrets, not when a process
starts: the MCP server and the web server start without it.
"""

from __future__ import annotations

from importlib import import_module

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
        plugin = getattr(import_module(f"detect_secrets.plugins.{module}"), name)
        found.extend((kind, pattern.pattern) for pattern in plugin.denylist)
    return found
