"""The compiler's in-process index cache outlives a test's rolled-back transaction: forget it
between tests so each test compiles over its own data."""

from __future__ import annotations

import pytest

from graph_app.index_cache import compiler_cache_clear


@pytest.fixture(autouse=True)
def _fresh_compiler_cache():
    compiler_cache_clear()
    yield
    compiler_cache_clear()
