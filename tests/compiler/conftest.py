"""The compiler's in-process index cache outlives a test's rolled-back transaction: forget it
between tests so each test compiles over its own data. ``snapshots``: index snapshots on, in
the test's own folder, written from the first row."""

from __future__ import annotations

import pytest

from graph_app.index_cache import compiler_cache_clear


@pytest.fixture(autouse=True)
def _fresh_compiler_cache():
    compiler_cache_clear()
    yield
    compiler_cache_clear()


@pytest.fixture
def snapshots(settings, tmp_path):
    settings.COMPILER_SNAPSHOT_DIR = str(tmp_path / "index")
    settings.COMPILER_SNAPSHOT_MIN_ROWS = 1
    return tmp_path / "index"
