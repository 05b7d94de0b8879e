"""What every management command prints the same way: its result (one JSON object with
--json, else a label/value table, the readable default) and a refusal (one JSON object with
--json, a line on stderr otherwise) with its exit status, so cron and scripts read every
command alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memoryproject.errors import ApplicationError

#: Exit status of a refusal: 1 when what was checked does not hold (audit and verification
#: commands), 2 when the input was bad (the portability commands).
CHECK_FAILED = 1
BAD_INPUT = 2


def json_flag_add(parser: CommandParser) -> None:
    """Adds ``--json``: print one JSON object rather than the readable table."""
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class Answer(Protocol):
    """A command's result that says itself as one JSON object."""

    def as_json(self) -> dict[str, Any]: ...


_A = TypeVar("_A", bound=Answer)


def answer(command: BaseCommand, result: _A, render: Callable[[_A], str], *, as_json: bool) -> None:
    """Prints a command's result: ``result.as_json()`` as one JSON object with --json, else the
    readable ``render(result)`` (which ends its own lines)."""
    if as_json:
        command.stdout.write(json.dumps(result.as_json()))
    else:
        command.stdout.write(render(result), ending="")


def answered(
    command: BaseCommand,
    call: Callable[[], _A],
    render: Callable[[_A], str],
    *,
    as_json: bool,
    status: int = CHECK_FAILED,
) -> _A:
    """Runs a command's ``call`` and prints its result with ``answer``; the ApplicationError it
    raises is refused with ``status``."""
    try:
        result = call()
    except ApplicationError as exc:
        refuse(command, exc.message, as_json=as_json, status=status)
    answer(command, result, render, as_json=as_json)
    return result


def table(rows: list[tuple[str, str]]) -> str:
    """Label/value rows, labels aligned."""
    width = max((len(label) for label, _ in rows), default=0)
    return "".join(f"  {label:<{width}}  {value}\n" for label, value in rows)


def refuse(
    command: BaseCommand, message: str, *, as_json: bool, status: int = CHECK_FAILED
) -> NoReturn:
    """Says why a command refused (one JSON object with --json, else ``name: message`` on
    stderr) and exits with ``status``."""
    if as_json:
        command.stdout.write(json.dumps({"ok": False, "error": message}))
    else:
        name = type(command).__module__.rsplit(".", 1)[-1]  # the command's own name
        command.stderr.write(f"{name}: {message}")
    raise SystemExit(status)


def input_file(command: BaseCommand, value: str, *, label: str, as_json: bool) -> Path:
    """``value`` as the path of a file the command reads; a refusal (bad input, naming the
    argument ``label``) when there is no such file."""
    path = Path(value)
    if not path.is_file():
        refuse(command, f"{label}: no such file {path}", as_json=as_json, status=BAD_INPUT)
    return path


def int_option(options: dict[str, Any], name: str, low: int, high: int) -> int:
    """The integer option ``name`` (as ``options`` holds it); a CommandError naming ``--name``
    unless it is from ``low`` to ``high``."""
    value: int = options[name]
    if not low <= value <= high:
        flag = "--" + name.replace("_", "-")
        raise CommandError(f"{flag}: must be an integer from {low} to {high}")
    return value
