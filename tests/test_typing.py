"""The types reach the doors: mypy (with the project's configuration and plugins) sees a
``@takes`` service's signature through its decorator, so an adapter passing the wrong input
model, a project that is not one or a misread answer is a type error, and the right calls are
clean. Runs mypy once in a child process over a few snippets, sharing the project's cache."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

ROOT = Path(__file__).resolve().parent.parent

GOOD = """
from graph_app.contracts.compile import CompileInput, CompileResult
from graph_app.contracts.facts import FactGetInput, FactOut
from graph_app.delivery import context_deliver
from graph_app.record_views import fact_get
from memoryproject.contracts import Caller, Input, Output, takes
from memoryproject.models import Project


def adapter(project: Project, query: str) -> tuple[CompileResult, FactOut, CompileResult]:
    compiled = context_deliver(
        project=project, params=CompileInput.parse({"query": query}), caller=Caller()
    )
    fact = fact_get(project=project, params=FactGetInput.parse({"fact_id": "f1"}))
    by_fields = context_deliver(project=project, query=query, channel="cli", client="a")
    return compiled, fact, by_fields


class PingInput(Input):
    n: int = 1


class Pong(Output):
    n: int


@takes(PingInput)
def ping(*, project: str, params: PingInput) -> Pong:
    return Pong(n=params.n)


pong: Pong = ping(project="p", params=PingInput(n=2))
also: Pong = ping(project="p", n=2)
"""

# Each line that must be an error ends with "# error: <what mypy's message contains>".
BAD = """
from graph_app.contracts.compile import CompileInput
from graph_app.contracts.facts import FactGetInput
from graph_app.delivery import context_deliver
from graph_app.record_views import fact_get
from memoryproject.contracts import Caller, Input, takes
from memoryproject.models import Project


def adapter(project: Project, compile_input: CompileInput, get: FactGetInput) -> None:
    context_deliver(project=project, params=get, caller=Caller())  # error: No overload variant
    fact_get(project="default", params=get)  # error: No overload variant
    fact_get(project=project, params=get, fact_id="f1")  # error: No overload variant
    context_deliver(project=project, params=compile_input, caller="cli")  # error: No overload
    tokens: int = context_deliver(project=project, params=compile_input)  # error: "CompileResult"
    fact_get(project=project, params=get).no_such_field  # error: has no attribute


class PingInput(Input):
    n: int = 1


@takes(PingInput)  # error: of "Takes" matches argument type
def ping(*, project: str, params: CompileInput) -> int:
    return 0
"""


def _expected(source: str) -> dict[int, str]:
    marks = (re.search(r"# error: (.+)$", line) for line in source.splitlines())
    return {number: mark.group(1) for number, mark in enumerate(marks, 1) if mark}


def test_takes_keeps_the_service_signature_for_mypy(tmp_path: Path) -> None:
    good, bad = tmp_path / "typing_good.py", tmp_path / "typing_bad.py"
    good.write_text(dedent(GOOD).lstrip())
    bad.write_text(dedent(BAD).lstrip())
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "--hide-error-context",
            str(good),
            str(bad),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if run.returncode not in (0, 1) or run.stderr.strip():
        pytest.fail(f"mypy did not run: {run.stderr or run.stdout}")
    errors: dict[str, dict[int, list[str]]] = {good.name: {}, bad.name: {}}
    for line in run.stdout.splitlines():
        found = re.match(r"(?:.*[/\\])?(typing_\w+\.py):(\d+): error: (.+)$", line)
        if found:
            errors[found[1]].setdefault(int(found[2]), []).append(found[3])

    assert errors[good.name] == {}, run.stdout
    expected = _expected(dedent(BAD).lstrip())
    assert set(errors[bad.name]) == set(expected), run.stdout
    for number, words in expected.items():
        assert any(words in message for message in errors[bad.name][number]), run.stdout
