"""Load and crash testing over the real doors: server instances serving the REST API on their
own database, concurrent HTTP clients writing and reading, then proof that every acknowledged
write is still there and that the injection log and the graph verify.

Nothing here imports the project's models: the database under test is not the one this
process is configured with. Setting it up, creating keys and verifying the log go through
``manage.py`` in child processes, as an operator would run them; everything else through HTTP.
"""

from benchmarks.loadtest.run import LoadOptions, LoadReport, loadtest_run
from benchmarks.loadtest.server import AppServer, free_port
from benchmarks.loadtest.target import LoadTestError, Target, target_prepare
from benchmarks.loadtest.verify import Verification, verify_all
from benchmarks.loadtest.workload import DEFAULT_MIX, Workload, mix_parse

__all__ = [
    "DEFAULT_MIX",
    "AppServer",
    "LoadOptions",
    "LoadReport",
    "LoadTestError",
    "Target",
    "Verification",
    "Workload",
    "free_port",
    "loadtest_run",
    "mix_parse",
    "target_prepare",
    "verify_all",
]
