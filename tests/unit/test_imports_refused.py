"""``imports_refused``: a module not loaded yet cannot be imported inside the block, and
imports as usual after it; one loaded already is left alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryproject.domain.imports import imports_refused


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_refused_module_fails_to_import_inside_the_block_and_imports_after_it():
    # In a new interpreter, where the module (a standard one no start-up loads) is not loaded.
    out = _run(
        "import sys\n"
        "from memoryproject.domain.imports import imports_refused\n"
        "with imports_refused('tomllib', 'wave'):\n"
        "    try:\n"
        "        import tomllib\n"
        "    except ImportError:\n"
        "        print('refused')\n"
        "    try:\n"
        "        import wave.x\n"
        "    except ImportError:\n"
        "        print('refused')\n"
        "import tomllib, wave\n"
        "print(tomllib.loads('a = 1')['a'], 'wave' in sys.modules)\n"
    )
    assert out.split("\n") == ["refused", "refused", "1 True"]


def test_a_module_already_loaded_is_left_as_it_is():
    import json

    with imports_refused("json"):
        import json as again

    assert again is json and sys.modules["json"] is json


def test_the_refusal_ends_when_the_block_raises():
    with pytest.raises(RuntimeError), imports_refused("never_installed_module_xyz"):
        raise RuntimeError("boom")
    assert "never_installed_module_xyz" not in sys.modules
