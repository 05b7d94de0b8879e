"""A temporary, migrated database for commands that must never touch the configured one
(benchmarks, the guided demo): the default connection is switched to it for the duration and
it is dropped afterwards."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections


@contextmanager
def temporary_database(label: str = "scratch") -> Iterator[str]:
    """Switches the default connection to a fresh, migrated database named after ``label`` and
    drops it afterwards, restoring the configured one. Yields the temporary database's name."""
    connection = connections[DEFAULT_DB_ALIAS]
    test_settings = connection.settings_dict.setdefault("TEST", {})
    saved = dict(test_settings)
    tmpdir = ""
    if connection.vendor == "sqlite":
        tmpdir = tempfile.mkdtemp(prefix=f"{label}_")
        test_settings["NAME"] = os.path.join(tmpdir, f"{label}.sqlite3")
    else:
        test_settings["NAME"] = f"{connection.settings_dict['NAME']}_{label}"
    # create_test_db answers the new name; the configured one must be kept to switch back.
    old_name = connection.settings_dict["NAME"]
    # The temporary database has a witness of its own, dropped with it: its heads must never
    # reach the configured database's witness.
    witness_dir, saved_witness = tempfile.mkdtemp(prefix=f"{label}_witness_"), settings.WITNESS_DIR
    settings.WITNESS_DIR = witness_dir
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=False)
    try:
        yield str(connection.settings_dict["NAME"])
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        settings.WITNESS_DIR = saved_witness
        shutil.rmtree(witness_dir, ignore_errors=True)
        test_settings.clear()
        test_settings.update(saved)
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
