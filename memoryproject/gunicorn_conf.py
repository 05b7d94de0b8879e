"""gunicorn settings for serving the REST API: ``gunicorn memoryproject.wsgi -c
memoryproject/gunicorn_conf.py`` (options on the command line override these)."""

import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "2"))
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
threads = int(os.environ.get("GUNICORN_THREADS", "2"))
timeout = 120
graceful_timeout = 10
# Clients keep their connection between requests; a short keep-alive would race a request sent
# just as the server closes the idle connection.
keepalive = 30
