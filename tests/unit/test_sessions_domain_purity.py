"""The session and audit domain modules are pure Python: no Django, DRF or MCP imports."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("django", "rest_framework", "mcp")
MODULES = sorted((ROOT / "sessions_app" / "domain").glob("*.py")) + sorted(
    (ROOT / "audit_app" / "domain").glob("*.py")
)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_domain_module_imports_no_framework(path):
    tree = ast.parse(path.read_text())
    imported = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ] + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.split(".")[0] in FORBIDDEN]
