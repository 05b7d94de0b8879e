"""Every domain module (memoryproject, sessions_app, graph_app, audit_app) is pure Python: no
Django, DRF or MCP import, and of the project's own code only other domain modules, so pure
computation never reaches the database or a framework (import-linter checks the indirect
imports too: make lint)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memoryproject", "sessions_app", "graph_app", "audit_app")
FORBIDDEN = ("django", "rest_framework", "mcp")
MODULES = [
    path for package in PACKAGES for path in sorted((ROOT / package / "domain").glob("*.py"))
]


def _imported(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ] + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_domain_module_imports_no_framework_and_only_domain_code(path):
    imported = _imported(path)
    assert not [name for name in imported if name.split(".")[0] in FORBIDDEN]
    own = [name for name in imported if name.split(".")[0] in PACKAGES]
    assert [name for name in own if name.split(".")[1:2] != ["domain"]] == []


def test_every_package_has_domain_modules_checked():
    assert {path.parents[1].name for path in MODULES} == set(PACKAGES)
