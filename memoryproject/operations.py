"""Operations: what each door exposes, defined once.

An ``Operation`` ties a typed input and output (see ``memoryproject.contracts``) to the service
or selector that performs it and to the project access it needs: "read" or "write", the one
scope rule both doors apply (a write needs a write or admin key, whatever the door). The REST view
(``memoryproject.drf.OperationView``) and the MCP tool (``memoryproject.mcp.add_tool``) of an
operation are both built from the same object, so their arguments, defaults, bounds, errors and
answers cannot drift apart; ``tests/core/test_operations.py`` checks that every MCP tool and its
REST twin share it.

Most operations act on one project, resolved by the one convention (memoryproject.projects).
One whose ``run`` is wrapped in ``AcrossProjects`` (``spans_projects``) acts on every project its
caller's identity may read (auditors' verification): its ``project`` only narrows it, and its
``run`` also gets the ``identity``. ``Run`` and ``SpanningRun`` are the shapes the type checker
holds a run to, so an operation's input model is the one its service takes.
An operation may need a higher key ``scope`` than its access gives ("admin" for auditors'
reads); both doors refuse a key below it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from memoryproject.contracts import Caller, Input, Output
from memoryproject.models import Project
from memoryproject.projects import Access, Identity

I = TypeVar("I", bound=Input)  # noqa: E741
O = TypeVar("O", bound=Output)  # noqa: E741
_I_in = TypeVar("_I_in", bound=Input, contravariant=True)
_O_out = TypeVar("_O_out", bound=Output, covariant=True)


class Run(Protocol[_I_in, _O_out]):
    """What performs an operation on one project (a ``@takes`` service or selector)."""

    def __call__(self, *, project: Project, params: _I_in, caller: Caller) -> _O_out: ...


class SpanningRun(Protocol[_I_in, _O_out]):
    """What performs an operation over every project ``identity`` may read (``project``: the
    one named, or None)."""

    def __call__(
        self,
        *,
        identity: Identity | None,
        project: Project | None,
        params: _I_in,
        caller: Caller,
    ) -> _O_out: ...


@dataclass(frozen=True)
class AcrossProjects(Generic[I, O]):
    """Marks an operation's run as spanning the caller's projects (auditors' verification)."""

    run: SpanningRun[I, O]


@dataclass(frozen=True)
class Operation(Generic[I, O]):
    name: str
    input: type[I]
    output: type[O]
    access: Access
    #: The service or selector, called as ``run(project=..., params=..., caller=...)``; or,
    #: wrapped in ``AcrossProjects``, one that also gets the ``identity``.
    run: Run[I, O] | AcrossProjects[I, O]
    #: REST answers 201 when this says the call created something (default: never).
    created: Callable[[O], bool] | None = None
    #: The key scope the call needs when ``access`` alone says too little ("admin").
    scope: str | None = None

    @property
    def spans_projects(self) -> bool:
        """Acts on every project the identity may read (``project``: the one named, or None)."""
        return isinstance(self.run, AcrossProjects)

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
        run = self.run
        if isinstance(run, AcrossProjects):
            return run.run(identity=identity, project=project, params=params, caller=caller)
        if project is None:
            raise TypeError(f"{self.name} acts on one project: the door must resolve it")
        return run(project=project, params=params, caller=caller)

    def parse(self, data: Any, *, strict: bool = True) -> I:
        """The operation's input from a request body or tool arguments (``project`` is not part
        of it: each door resolves the project itself)."""
        return self.input.parse(data, strict=strict)
