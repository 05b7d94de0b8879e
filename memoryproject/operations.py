"""Operations: what each door exposes, defined once.

An ``Operation`` ties a typed input and output (see ``memoryproject.contracts``) to the service
or selector that performs it and to the project access it needs: "read" or "write", the one
scope rule both doors apply (a write needs a write or admin key, whatever the door). The REST view
(``memoryproject.drf.OperationView``) and the MCP tool (``memoryproject.mcp.add_tool``) of an
operation are both built from the same object, so their arguments, defaults, bounds, errors and
answers cannot drift apart; ``tests/core/test_operations.py`` checks that every MCP tool and its
REST twin share it.

Most operations act on one project, resolved by the one convention (memoryproject.projects).
One that ``spans_projects`` acts on every project its caller's identity may read (auditors'
verification): its ``project`` only narrows it, and its ``run`` also gets the ``identity``.
An operation may need a higher key ``scope`` than its access gives ("admin" for auditors'
reads); both doors refuse a key below it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from memoryproject.contracts import Caller, Input, Output
from memoryproject.models import Project
from memoryproject.projects import Access, Identity

I = TypeVar("I", bound=Input)  # noqa: E741
O = TypeVar("O", bound=Output)  # noqa: E741


@dataclass(frozen=True)
class Operation(Generic[I, O]):
    name: str
    input: type[I]
    output: type[O]
    access: Access
    #: The service or selector: called as ``run(project=..., params=..., caller=...)``.
    run: Callable[..., O]
    #: REST answers 201 when this says the call created something (default: never).
    created: Callable[[O], bool] | None = None
    #: The key scope the call needs when ``access`` alone says too little ("admin").
    scope: str | None = None
    #: Acts on every project the identity may read (``project``: the one named, or None).
    spans_projects: bool = False

    @property
    def required_scope(self) -> str:
        """The scope a key needs for this operation, whatever the door."""
        return self.scope or self.access

    def __call__(
        self,
        *,
        project: Project | None,
        params: I,
        caller: Caller,
        identity: Identity | None = None,
    ) -> O:
        if self.spans_projects:
            return self.run(project=project, params=params, caller=caller, identity=identity)
        return self.run(project=project, params=params, caller=caller)

    def parse(self, data: Any, *, strict: bool = True) -> I:
        """The operation's input from a request body or tool arguments (``project`` is not part
        of it: each door resolves the project itself)."""
        return self.input.parse(data, strict=strict)
