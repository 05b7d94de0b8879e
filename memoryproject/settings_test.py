"""Settings for the test suite: the real settings with a test-only secret.

The database still comes from DATABASE_URL, so the same suite runs on SQLite and PostgreSQL.
SQLite tests use a file (not :memory:) so that server processes spawned by tests (MCP over
stdio) see the same data.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-use-0123456789")

from memoryproject.settings import *  # noqa: F403
from memoryproject.settings import BASE_DIR, DATABASES

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    _worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "data" / f"test_{_worker}.sqlite3")}
