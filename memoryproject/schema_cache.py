"""The JSON schemas of the MCP tools' input and output models, kept from one start to the next.

The contracts build a model's validators only when it is first used (``defer_build``), but
publishing a tool's JSON schema builds them: an MCP server's manifest made every tool's input
and output schema at each start, 55 to 65 ms of the back's CPU before the front could answer
the handshake (py-spy: 15 % of the back's start-up samples), when an agent's first call needs
one tool's validators. A model's JSON schema depends on the code and on pydantic alone, so the
schemas are kept in a file in the snapshot directory (``COMPILER_SNAPSHOT_DIR``):

- keyed by a fingerprint of the code: the bytes of every Python file of the service's
  packages, whatever a process has imported (so that every process of the same code agrees),
  and the versions of Python, pydantic and pydantic-core: any change of code or library makes
  them again;
- signed like the index snapshots (keyed BLAKE3, ``memoryproject.domain.signed_files``) under
  a key derived from ``SECRET_KEY`` for this one use: a file someone else wrote is ignored, so
  no one who can write in the directory without the key can change what the tools publish;
- read as JSON data only, and written atomically (owner only): a missing, damaged, foreign or
  outdated file is made again; an unwritable directory, or none, costs only the making.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core
from blake3 import blake3
from django.conf import settings
from pydantic import BaseModel

from memoryproject.domain.signed_files import derived_key, signed, signed_body
from memoryproject.filemodes import PRIVATE_DIR

log = logging.getLogger(__name__)

MAGIC = b"memoryproject-json-schemas/1\n"
FILE_NAME = "json-schemas.cache"
#: The packages whose Python files the fingerprint reads.
PACKAGES = frozenset({"memoryproject", "sessions_app", "graph_app", "audit_app", "orchestration"})


def model_name(model: type[BaseModel]) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def code_fingerprint() -> str:
    """BLAKE3 over the versions of Python, pydantic and pydantic-core and every Python file of
    ``PACKAGES`` but their migrations (its path in its package and its bytes, in path order):
    about 270 files, 1.5 MB, read in about 5 ms."""
    digest = blake3()
    for version in (sys.version, pydantic.VERSION, pydantic_core.__version__):
        digest.update(f"{version}\n".encode())
    for package in sorted(PACKAGES):
        spec = find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec else []:
            for folder, folders, files in os.walk(root):
                folders[:] = sorted(f for f in folders if f not in ("__pycache__", "migrations"))
                for name in sorted(f for f in files if f.endswith(".py")):
                    path = Path(folder, name)
                    digest.update(f"{package}/{path.relative_to(root)}\n".encode())
                    digest.update(path.read_bytes())
    return digest.hexdigest()


def _key() -> bytes:
    return derived_key(settings.SECRET_KEY, "memoryproject json schemas")


def cache_path() -> Path | None:
    directory = str(getattr(settings, "COMPILER_SNAPSHOT_DIR", "") or "")
    return Path(directory) / FILE_NAME if directory else None


def _kept(path: Path, fingerprint: str) -> dict[str, Any]:
    try:
        body = signed_body(path.read_bytes(), MAGIC, key=_key())
        document = json.loads(body) if body is not None else None
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(document, dict) or document.get("code") != fingerprint:
        return {}
    schemas = document.get("schemas")
    return schemas if isinstance(schemas, dict) else {}


def _keep(path: Path, fingerprint: str, schemas: dict[str, Any]) -> None:
    body = json.dumps({"code": fingerprint, "schemas": schemas}).encode()  # in their order
    try:
        path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(signed(MAGIC, body, key=_key()))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("JSON schemas not kept in %s: %s", path, exc)


def json_schemas(models: Sequence[type[BaseModel]]) -> dict[str, dict[str, Any]]:
    """Each model's ``model_json_schema()``, by ``model_name``: read from the kept file when it
    holds them for this code, made otherwise (and the file written again with them all)."""
    path = cache_path()
    fingerprint = code_fingerprint() if path is not None else ""
    kept = _kept(path, fingerprint) if path is not None else {}
    schemas: dict[str, dict[str, Any]] = {}
    for model in models:
        name = model_name(model)
        found = kept.get(name)
        schemas[name] = found if isinstance(found, dict) else model.model_json_schema()
    if path is not None and any(name not in kept for name in schemas):
        _keep(path, fingerprint, {**kept, **schemas})
    return schemas
