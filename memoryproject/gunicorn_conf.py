"""gunicorn settings for serving the REST API: ``gunicorn memoryproject.wsgi -c
memoryproject/gunicorn_conf.py`` (options on the command line override these)."""

import os

from memoryproject.collector import start_up_pause, start_up_settle

# The master loads the application (preload_app below) and warms its indexes with the
# collector off; it runs again, what start-up built frozen out of its generations (and so
# shared by the workers), before the first worker is forked (``when_ready``).
start_up_pause()

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "2"))
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
# One thread per worker: the threads of a worker share one interpreter lock, so a second thread
# slowed the one holding the database's write turn (side by side with the CognOS gateway on
# 2026-12-01: 196 against 175 req/s and 170 against 142, with 1 and 2 threads, alternating).
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
# Each worker listens on a socket of its own (SO_REUSEPORT), among which the kernel spreads new
# connections evenly. On one shared socket the workers race to accept, and a few long-lived
# keep-alive connections (a proxy's upstream pool, a load generator) could all land on one
# worker while the other sat idle: under wrk -t2 -c8, 4 rounds of 10 fell to 55 % of the
# others on 2026-12-01, none with the option. A worker stopping resets the connections
# waiting in its own socket's queue. GUNICORN_REUSE_PORT=0: one shared socket.
reuse_port = os.environ.get("GUNICORN_REUSE_PORT", "1") != "0"
timeout = 120
graceful_timeout = 10
# Clients keep their connection between requests; a short keep-alive would race a request sent
# just as the server closes the idle connection.
keepalive = 30

# gunicorn's control socket (for ``gunicornc``: worker status, adding workers, reload and
# shutdown) defaults to one path per user ($XDG_RUNTIME_DIR/gunicorn.ctl, else
# ~/.gunicorn/gunicorn.ctl): a second server the same user starts (another project, a benchmark
# beside ``make run``) unlinks the first one's and listens there, so a command meant for one
# server reaches the other, and the first to stop removes the other's socket. Off, unless
# GUNICORN_CONTROL_SOCKET names a path for this server alone.
control_socket_disable = not os.environ.get("GUNICORN_CONTROL_SOCKET", "").strip()
if not control_socket_disable:
    control_socket = os.environ["GUNICORN_CONTROL_SOCKET"].strip()

# Forwarded headers count from the reverse proxies TRUSTED_PROXIES lists only, the list the
# application reads (memoryproject.proxies), instead of gunicorn's default of any loopback peer.
# gunicorn sets no scheme from them: Django alone reads X-Forwarded-Proto, with
# TRUST_X_FORWARDED_PROTO, so one switch decides whether it counts.
forwarded_allow_ips = ",".join(
    item.strip() for item in os.environ.get("TRUSTED_PROXIES", "").split(",") if item.strip()
)
secure_scheme_headers: dict[str, str] = {}

# The application is loaded once, in the master. Before the master forks its workers it runs
# each app's warmers (``memoryproject.warmup``): secret screening's rules are compiled, and the
# graph's loads (from its snapshot) or builds every project's compiler index, so each worker
# starts with them, shared copy-on-write, instead of loading its own on its first compile: a
# worker started later (after a crash) only reads the rows written since. GUNICORN_PRELOAD=0:
# each worker loads its own, on first use.
preload_app = os.environ.get("GUNICORN_PRELOAD", "1") != "0"


def when_ready(server):  # type: ignore[no-untyped-def]
    """Runs in the master once it listens, before the first worker is forked."""
    if not preload_app:
        start_up_settle()
        return
    from django.db import connections
    from django.urls import get_resolver

    from memoryproject.warmup import warm_in_background

    # The indexes load in a thread (which closes its own database connections: a forked worker
    # must never share the master's) while this one imports every view; both end before the
    # first worker is forked. A failed load (an unmigrated database, say) is logged, and each
    # worker then loads its own on first use.
    warming = warm_in_background()
    try:
        get_resolver().url_patterns  # noqa: B018 - imports every view once, in the master
    finally:
        warming.join()
        connections.close_all()
        start_up_settle()


def on_reload(server):  # type: ignore[no-untyped-def]
    """A reload read this file again, pausing the collector: it runs again before the new
    workers are forked (``when_ready`` runs once, at the first start)."""
    start_up_settle()
