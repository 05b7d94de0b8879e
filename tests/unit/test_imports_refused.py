"""``imports_refused``: a module not loaded yet cannot be imported inside the block, and
imports as usual after it; one loaded already is left alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryproject.domain.imports import imports_deferred, imports_refused


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
        "from memoryproject.domain.imports import imports_deferred, imports_refused\n"
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


def test_a_deferred_module_loads_when_an_attribute_is_first_read():
    # In a new interpreter: importing it again inside or after the block loads nothing; the
    # first attribute read loads it, and it then stands in sys.modules as itself.
    out = _run(
        "import sys\n"
        "from memoryproject.domain.imports import imports_deferred\n"
        "with imports_deferred('tomllib', 'never_installed_module_xyz'):\n"
        "    import tomllib\n"
        "    try:\n"
        "        import never_installed_module_xyz\n"
        "    except ImportError:\n"
        "        print('missing')\n"
        "import tomllib as again\n"
        "print(again is tomllib, 'tomllib._parser' in sys.modules)\n"
        "print(tomllib.loads('a = 1')['a'], 'tomllib._parser' in sys.modules)\n"
        "print(sys.modules['tomllib'] is not tomllib, sys.modules['tomllib'].loads is tomllib.loads)\n"
    )
    assert out.split("\n") == ["missing", "True False", "1 True", "True True"]


def test_a_module_already_loaded_is_not_deferred():
    import json

    with imports_deferred("json"):
        import json as again

    assert again is json and sys.modules["json"] is json
