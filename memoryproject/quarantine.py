"""Where deliveries ask which flagged items a reviewer released, and where they queue the ones
they hold back: the foundation's side of the review queue.

The review queue lives in ``audit_app`` (``audit_app.quarantine``), above the apps that
deliver memory; it fills this registry in its ``AppConfig.ready()``, so ``graph_app`` and
``sessions_app`` reach it without importing it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack

from memoryproject.domain.screening import Flag
from memoryproject.domain.spotlight import flag_reasons
from memoryproject.models import Project


class Released(Protocol):
    """The review queue's answer to which flagged ``(kind, id, sha256)`` were released."""

    def __call__(
        self, *, project: Project, items: Iterable[tuple[str, str, str]]
    ) -> set[tuple[str, str]]: ...


class HeldItem(TypedDict):
    """A flagged item queued for review: where it is, its content hash, why it was flagged and
    its text as the reviewer sees it."""

    project: Project
    kind: str
    item_id: str
    sha256: str
    reasons: Sequence[str]
    text: str


class Hold(Protocol):
    """The review queue's door for a flagged item (what it answers is its own)."""

    def __call__(self, **item: Unpack[HeldItem]) -> object: ...


@dataclass
class _Registry:
    released: Released | None = None
    hold: Hold | None = None


_registry = _Registry()


def quarantine_register(*, released: Released, hold: Hold) -> None:
    """Called once by the review queue's app when it is ready."""
    _registry.released, _registry.hold = released, hold


def items_released(
    *, project: Project, items: Iterable[tuple[str, str, str]]
) -> set[tuple[str, str]]:
    """Which of the flagged ``(kind, id, sha256)`` a reviewer released, as ``(kind, id)``."""
    wanted = list(items)
    if not wanted:
        return set()
    if _registry.released is None:
        raise RuntimeError("the review queue (audit_app) is not installed")
    return _registry.released(project=project, items=wanted)


def item_hold(**item: Unpack[HeldItem]) -> None:
    """Queues a flagged item for review (once), in the caller's transaction."""
    if _registry.hold is None:
        raise RuntimeError("the review queue (audit_app) is not installed")
    _registry.hold(**item)


def record_hold(
    *,
    project: Project,
    kind: str,
    item_id: str,
    sha256: str,
    flags: Iterable[Flag],
    record: Mapping[str, Any],
) -> None:
    """Queues a record a write found flagged (nothing when ``flags`` is empty), with the record
    as JSON for the reviewer: the review queue holds every flagged item from its write on."""
    reasons = flag_reasons(flags)
    if reasons:
        item_hold(
            project=project,
            kind=kind,
            item_id=item_id,
            sha256=sha256,
            reasons=reasons,
            text=json.dumps(dict(record), ensure_ascii=False, indent=2, default=str),
        )
