"""The shape the code keeps so that adapters stay thin: short functions, one set of MCP tool
annotations, contracts without framework imports."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APPS = ("memoryproject", "sessions_app", "graph_app", "audit_app", "orchestration", "benchmarks")
MAX_FUNCTION_LINES = 80


def _sources() -> list[Path]:
    return [
        path
        for app in APPS
        for path in sorted((REPO / app).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines})")
    assert not long, "split these functions:\n" + "\n".join(long)


def test_tool_annotations_are_declared_once():
    inline = [
        str(path.relative_to(REPO))
        for path in _sources()
        if path != REPO / "memoryproject" / "mcp_calls.py"
        and ("ToolAnnotations(" in path.read_text() or "ToolHints(" in path.read_text())
    ]
    assert not inline, f"use the constants of memoryproject.mcp_calls instead: {inline}"


def test_contracts_and_domain_import_no_framework():
    paths = [*REPO.glob("*/contracts.py"), *REPO.glob("*/contracts/*.py")]
    paths += [*REPO.glob("*/domain/*.py")]
    assert len(paths) > 10
    for path in paths:
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        assert not imported & {"django", "rest_framework", "mcp"}, path
