"""Settings for the test suite: the real settings with a test-only secret, over plain HTTP.

The database still comes from DATABASE_URL, so the same suite runs on SQLite and PostgreSQL.
SQLite tests use a file (not :memory:) so that server processes spawned by tests (MCP over
stdio) see the same data. MEMORY_TEST_DB_SUFFIX keeps concurrent suites on one machine apart.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-use-0123456789")
# The test client, live servers and servers the tests start speak plain HTTP on loopback.
os.environ.setdefault("PLAIN_HTTP", "1")
# One witness signing key for the suite (made on first use, 0600); each test's witness
# directory is its own (tests/conftest.py), exported so that the servers it starts share it.
os.environ.setdefault(
    "WITNESS_KEY_FILE",
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "test_witness.key"
    ),
)

from memoryproject.dbconfig import is_sqlite
from memoryproject.settings import *  # noqa: F403
from memoryproject.settings import BASE_DIR, DATABASES, STORAGES

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"

_suffix = os.environ.get("MEMORY_TEST_DB_SUFFIX", "").strip()
if is_sqlite(DATABASES["default"]):
    _worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _name = f"test_{_worker}{'_' + _suffix if _suffix else ''}.sqlite3"
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "data" / _name)}
elif _suffix:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{_suffix}"}

# The suite's large corpora must not leave index snapshots in the checkout; the snapshot tests
# point COMPILER_SNAPSHOT_DIR at a temporary folder themselves (a server a test starts, through
# TEST_COMPILER_SNAPSHOT_DIR).
COMPILER_SNAPSHOT_DIR = os.environ.get("TEST_COMPILER_SNAPSHOT_DIR", "")
# A snapshot due is written in the process that crossed the threshold, when the test expects it;
# the background writer's own test turns COMPILER_SNAPSHOT_BACKGROUND on and waits for it.
COMPILER_SNAPSHOT_BACKGROUND = False
