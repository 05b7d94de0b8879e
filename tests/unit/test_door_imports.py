"""Each door loads only its own frameworks: the MCP server (``manage.py mcp_serve``) no REST
framework or schema generator, the web server (the WSGI application with every URL's view) no
MCP SDK. Each check runs in a new interpreter, as the server starts, and reads the modules it
has loaded (``sys.modules``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memoryproject.mcp_calls import manifest, registry_build
from memoryproject.mcp_split import SHARED
from tests.new_process import new_process_env

ROOT = Path(__file__).resolve().parents[2]

# As `manage.py mcp_serve --project P --scope read` runs up to serving: settings and apps for
# the command (Django dispatches on argv[1]), the command's module, the server with every
# app's tools, resources and prompts.
MCP_SERVE = """
import sys
sys.argv = ["manage.py", "mcp_serve", "--project", "default", "--scope", "read"]
import django
django.setup()
from django.core.management import load_command_class
load_command_class("memoryproject", "mcp_serve")
from memoryproject.mcp import build_server
from memoryproject.projects import LocalIdentity
build_server(local=LocalIdentity(project="default", scope="read"))
print("\\n".join(sorted(sys.modules)))
"""

# As `manage.py mcp_serve` runs up to starting its index load: settings and apps for the
# command, the command's module.
MCP_SERVE_COMMAND = """
import sys
sys.argv = ["manage.py", "mcp_serve", "--project", "default", "--scope", "read"]
import django
django.setup()
from django.core.management import load_command_class
load_command_class("memoryproject", "mcp_serve")
print("\\n".join(sorted(sys.modules)))
"""

# The back of a stdio server in two processes (memoryproject.mcp_split), up to sending its
# manifest: settings and apps, the command's module, every app's tools, resources and prompts.
MCP_BACK = """
import sys
sys.argv = ["manage.py", "mcp_serve", "--project", "default", "--scope", "read"]
import django
django.setup()
from django.core.management import load_command_class
load_command_class("memoryproject", "mcp_serve")
from memoryproject.mcp_calls import manifest, registry_build
from tests.new_process import new_process_env
manifest(registry_build())
print("\\n".join(sorted(sys.modules)))
"""

# Its front, as manage.py runs it up to serving: the server built from the back's manifest.
MCP_FRONT = """
import json
import sys
import memoryproject.mcp_split
from memoryproject.mcp_server import server_build
server = server_build(json.loads(sys.argv[1]), lambda request: {})
assert len(server._tool_manager.list_tools()) >= 14
print("\\n".join(sorted(sys.modules)))
"""

# As the REST API's server loads the application (memoryproject/server.py): the WSGI module,
# then every URL's view.
WSGI = """
import sys
import memoryproject.server
import memoryproject.wsgi
from django.urls import get_resolver
get_resolver().url_patterns
print("\\n".join(sorted(sys.modules)))
"""


def _run(
    script: str,
    tmp_path: Path,
    *,
    unset: tuple[str, ...] = (),
    args: tuple[str, ...] = (),
    **extra: str,
) -> str:
    """What ``script`` prints, run in a new interpreter (``extra`` added to its environment,
    the variables named in ``unset`` taken out)."""
    env = new_process_env(tmp_path, "doors.sqlite3", unset=unset, **extra)
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _loaded(script: str, tmp_path: Path) -> set[str]:
    return set(_run(script, tmp_path).split())


def _before_print(script: str, *lines: str) -> str:
    """``script`` running ``lines`` before it prints its modules."""
    return script.replace("print(", "".join(f"{line}\n" for line in lines) + "print(")


def _of(modules: set[str], *packages: str) -> list[str]:
    return sorted(name for name in modules if name.split(".")[0] in packages)


def test_the_mcp_server_loads_no_rest_framework(tmp_path):
    loaded = _loaded(MCP_SERVE, tmp_path)
    assert "mcp.server.mcpserver" in loaded  # the probe reached the server
    assert "graph_app.mcp_tools.compile" in loaded
    assert _of(loaded, "rest_framework", "drf_spectacular", "django_filters") == []
    # detect-secrets (and requests with it) loads when a text is first screened for secrets
    assert "memoryproject.domain.screening_secrets" in loaded
    assert _of(loaded, "detect_secrets", "requests") == []


def test_the_mcp_server_loads_no_console_renderer(tmp_path):
    # The SDK would build a rich log handler (rich is installed here for development tools)
    # that Django's logging configuration then ignores.
    loaded = _loaded(MCP_SERVE, tmp_path)
    assert "mcp.server.mcpserver" in loaded
    assert _of(loaded, "rich") == []


def test_rich_still_imports_once_the_mcp_server_is_built(tmp_path):
    script = _before_print(
        MCP_SERVE,
        "import logging",
        "from rich.console import Console",
        "assert Console.__name__ == 'Console'",
        "assert [type(h).__name__ for h in logging.getLogger().handlers] == ['StreamHandler']",
    )
    assert "rich.console" in _loaded(script, tmp_path)


def test_a_warmed_server_screens_its_first_text_without_loading_anything(tmp_path):
    # The warmers a server runs as it starts (mcp_serve in the background, the REST API's
    # server in its main process before it forks) compile secret screening's rules: the first
    # query an agent sends is masked with nothing left to import or compile.
    script = MCP_SERVE_COMMAND.replace(
        'print("\\n".join(sorted(sys.modules)))',
        "from memoryproject.warmup import warm\n"
        "warm([])\n"
        "before = set(sys.modules)\n"
        "from memoryproject.domain.screening_secrets import secret_rules, text_mask\n"
        "hits = secret_rules.cache_info().hits\n"
        "key = 'SG.' + 'aaaaBBBBccccDDDDeeee12.' + 'ffffGGGGhhhhIIIIjjjjKKKKllllMMMMnnnnOOOOppp'\n"
        "masked, _ = text_mask('mailer key ' + key)\n"
        "assert masked == 'mailer key [masked:sendgrid_key]', masked\n"
        "assert secret_rules.cache_info().hits > hits\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))",
    )
    assert "masked" not in MCP_SERVE_COMMAND and script != MCP_SERVE_COMMAND
    assert _run(script, tmp_path).split() == []


def test_screening_warmed_leaves_the_http_client_detect_secrets_imports_unloaded(tmp_path):
    # detect-secrets imports requests (to verify a token over the network, never asked of it):
    # a stand-in takes its place until something reads it.
    script = _before_print(
        WSGI,
        "from memoryproject.warmup import warm",
        "warm([])",
        "assert type(sys.modules['requests']).__name__ == '_Deferred'",
    )
    loaded = _loaded(script, tmp_path)
    assert "detect_secrets.plugins.base" in loaded
    assert _of(loaded, "urllib3", "charset_normalizer", "idna") == []
    assert "requests.exceptions" not in loaded


def test_the_mcp_server_starts_its_index_load_before_importing_the_mcp_sdk(tmp_path):
    # mcp_serve starts loading the index in a thread once the identity is checked, then
    # imports the SDK: the load overlaps that import only if nothing before imported it.
    loaded = _loaded(MCP_SERVE_COMMAND, tmp_path)
    assert "memoryproject.management.commands.mcp_serve" in loaded
    assert _of(loaded, "mcp", "mcp_types") == []


def test_the_back_of_a_stdio_server_loads_no_mcp_sdk(tmp_path):
    loaded = _loaded(MCP_BACK, tmp_path)
    assert "graph_app.mcp_tools.compile" in loaded  # the probe reached the tools
    assert _of(loaded, "mcp", "mcp_types") == []
    assert _of(loaded, "rest_framework", "drf_spectacular") == []


def test_the_front_of_a_stdio_server_loads_no_django(tmp_path):
    published = json.dumps(manifest(registry_build()))
    loaded = set(_run(MCP_FRONT, tmp_path, args=(published,)).split())
    assert "mcp.server.mcpserver" in loaded  # the probe reached the server
    assert _of(loaded, "django", "rest_framework", "numpy") == []
    assert _of(loaded, "graph_app", "sessions_app", "audit_app") == []


def test_the_web_application_loads_no_mcp_sdk(tmp_path):
    loaded = _loaded(WSGI, tmp_path)
    assert "graph_app.api.compile" in loaded  # the probe reached the views
    assert "drf_spectacular.views" in loaded
    assert _of(loaded, "mcp", "mcp_types") == []
    assert _of(loaded, "detect_secrets") == []


def test_the_web_application_on_sqlite_loads_no_postgresql_driver(tmp_path):
    # DRF's compat module would import django.contrib.postgres, and psycopg with it.
    loaded = _loaded(WSGI, tmp_path)
    assert "rest_framework.compat" in loaded
    assert _of(loaded, "psycopg") == []
    assert "django.contrib.postgres.fields" not in loaded


def test_the_web_application_loads_no_http_client(tmp_path):
    # DRF's compat module would import requests (for a test client) when it is installed.
    loaded = _loaded(WSGI, tmp_path)
    assert "rest_framework.compat" in loaded
    assert _of(loaded, "requests", "urllib3", "charset_normalizer") == []


def test_the_web_application_loads_no_browsable_api_renderers(tmp_path):
    # DRF's compat module would import markdown and pygments (installed for the docs site) for
    # its browsable API; the service answers JSON only.
    loaded = _loaded(WSGI, tmp_path)
    assert "rest_framework.compat" in loaded
    assert _of(loaded, "markdown", "pygments") == []


def test_the_web_application_loads_no_template_engine(tmp_path):
    # Django's test utilities (loaded through the schema generator and DRF's test client)
    # would import jinja2 when it is installed (the docs site's tools bring it) for a decorator
    # of template tests; a stand-in on the path tells whether anything imported it.
    stand_in = tmp_path / "site" / "jinja2"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    script = _before_print(WSGI, "from django.test import utils", "assert utils.jinja2 is None")
    path = str(stand_in.parent)
    loaded = set(_run(script, tmp_path, PYTHONPATH=path).split())
    assert "django.test.utils" in loaded
    assert _of(loaded, "jinja2") == []
    # Imported later, it loads as usual.
    later = _before_print(WSGI, "import jinja2", "assert jinja2.__file__")
    assert "jinja2" in _run(later, tmp_path, PYTHONPATH=path).split()


def test_requests_still_imports_once_the_web_application_is_loaded(tmp_path):
    script = _before_print(
        WSGI,
        "import requests",
        "from rest_framework import compat",
        "assert requests.Session.__name__ == 'Session' and compat.requests is None",
    )
    assert "requests" in _loaded(script, tmp_path)


def test_postgresql_fields_still_import_once_the_web_application_is_loaded(tmp_path):
    script = _before_print(
        WSGI,
        "from django.contrib.postgres.fields import ArrayField",
        "assert ArrayField.__name__ == 'ArrayField'",
    )
    assert "django.contrib.postgres.fields" in _loaded(script, tmp_path)


# After the settings and apps: the environment's BLAS thread count and numpy's BLAS thread
# pools, as threadpoolctl reads them.
BLAS = """
import json
import os
import django
django.setup()
import numpy
from threadpoolctl import threadpool_info
pools = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
print(json.dumps({"env": os.environ.get("OPENBLAS_NUM_THREADS"), "pools": pools}))
"""


def _blas(tmp_path: Path, **env: str) -> dict[str, object]:
    """The BLAS figures of a new process, OPENBLAS_NUM_THREADS unset unless given."""
    return dict(json.loads(_run(BLAS, tmp_path, unset=("OPENBLAS_NUM_THREADS",), **env)))


def test_a_server_process_starts_no_blas_threads_without_the_semantic_backend(tmp_path):
    # Each thread OpenBLAS starts costs a new process CPU on its way to its first answer.
    assert _blas(tmp_path, MEMORY_SEMANTIC="0") == {"env": "1", "pools": [1]}


def test_the_semantic_backend_keeps_blas_threads_and_a_set_value_is_kept(tmp_path):
    assert _blas(tmp_path, MEMORY_SEMANTIC="1")["env"] is None
    kept = _blas(tmp_path, MEMORY_SEMANTIC="0", OPENBLAS_NUM_THREADS="2")
    assert kept == {"env": "2", "pools": [2]}


# What manage.py imports before it forks a stdio server into its two halves.
SHARED_ONLY = """
import sys
from memoryproject.mcp_split import shared_import
shared_import()
print("\\n".join(sorted(sys.modules)))
"""


def test_what_is_imported_before_the_fork_is_what_both_halves_import(tmp_path):
    # Each module imported once before the fork spares one half importing it: one neither
    # half would import makes both larger; one only the front imports delays the back's
    # start, and the reverse.
    published = json.dumps(manifest(registry_build()))
    front = set(_run(MCP_FRONT, tmp_path, args=(published,)).split())
    back = _loaded(MCP_BACK, tmp_path)
    assert [name for name in SHARED if name not in front] == []
    assert [name for name in SHARED if name not in back] == []
    shared = _loaded(SHARED_ONLY, tmp_path)
    assert _of(shared, "django", "mcp", "mcp_types", "numpy", "graph_app") == []
    assert set(SHARED) <= shared
