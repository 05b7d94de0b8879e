"""Operations: what each door exposes, defined once.

An ``Operation`` ties a typed input and output (see ``memoryproject.contracts``) to the service
or selector that performs it and to the project access it needs: "read" or "write", the one
scope rule both doors apply (a write needs a write or admin key, whatever the door). The REST view
(``memoryproject.drf.OperationView``) and the MCP tool (``memoryproject.mcp.add_tool``) of an
operation are both built from the same object, so their arguments, defaults, bounds, errors and
answers cannot drift apart; ``tests/core/test_operations.py`` checks that every MCP tool and its
REST twin share it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from memoryproject.contracts import Caller, Input, Output
from memoryproject.models import Project
from memoryproject.projects import Access

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

    def __call__(self, *, project: Project, params: I, caller: Caller) -> O:
        return self.run(project=project, params=params, caller=caller)

    def parse(self, data: Any, *, strict: bool = True) -> I:
        """The operation's input from a request body or tool arguments (``project`` is not part
        of it: each door resolves the project itself)."""
        return self.input.parse(data, strict=strict)
