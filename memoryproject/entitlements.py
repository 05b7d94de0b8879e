"""Who may see an API key's prefix in the console.

A key's prefix is the visible half of the key (``<prefix>.<secret>``): it names the key in the
audit trail (``api_key:<prefix> (<name>)`` in a record's ``client``) and is what an attacker
guessing or replaying keys would aim at. Staff read those records for other reasons (the
Compliance officer reads the whole audit trail), so the prefix is shown only to people who may
view the keys themselves, as the keys' own admin pages require: the view or the change
permission on ``ProjectAPIKey``. Everyone else sees the key's name with its prefix masked.
"""

from __future__ import annotations

import re
from typing import Any

KEY_PERMISSIONS = ("memoryproject.view_projectapikey", "memoryproject.change_projectapikey")
#: What replaces a prefix: as long as a real one, so columns keep their width.
MASK = "••••••••"
_KEY_PREFIX = re.compile(r"(api_key:)[^\s()]+")


def may_see_key_prefixes(user: Any) -> bool:
    """Whether ``user`` (a request's user, anonymous included) may read API key prefixes."""
    return bool(getattr(user, "is_active", False)) and any(
        user.has_perm(permission) for permission in KEY_PERMISSIONS
    )


def key_prefixes_hidden(text: str) -> str:
    """``text`` with the prefix of every ``api_key:<prefix>`` in it masked; the rest (the key's
    name, other kinds of client) as it was."""
    return _KEY_PREFIX.sub(rf"\g<1>{MASK}", text)


def client_shown(client: str, *, user: Any) -> str:
    """A record's ``client`` as ``user`` may read it."""
    return client if may_see_key_prefixes(user) else key_prefixes_hidden(client)
