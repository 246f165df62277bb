"""Settings read from the environment.

With no environment at all the project runs on the *embedded default*: SQLite (WAL,
IMMEDIATE transactions) and Celery's filesystem transport, both under ``var/``, so a
bare machine can run web, worker and beat. Production sets ``DATABASE_URL``
(PostgreSQL) and ``CELERY_BROKER_URL`` (Redis).
"""

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from config.secret_key import secret_key_in

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("KEEL_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# --- Security (docs/operations.md, "Security"). KEEL_ENV=production is the production
# switch: it refuses to start without DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS or with
# DEBUG on, and turns on HTTPS-only defaults (each still overridable by its variable).
KEEL_ENV = os.environ.get("KEEL_ENV", "development").strip().lower()
if KEEL_ENV not in ("development", "production"):
    raise ImproperlyConfigured(f"KEEL_ENV must be 'development' or 'production', not {KEEL_ENV!r}.")
PRODUCTION = KEEL_ENV == "production"
DEBUG = env_bool("DJANGO_DEBUG", False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("KEEL_ENV=production refuses DJANGO_DEBUG=on: debug pages show settings and data.")
if os.environ.get("DJANGO_SECRET_KEY"):
    SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
    if PRODUCTION and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
        raise ImproperlyConfigured(
            "KEEL_ENV=production refuses a weak DJANGO_SECRET_KEY (under 50 characters, or fewer than 5 distinct "
            "ones): make one with python -c 'import secrets; print(secrets.token_urlsafe(50))'."
        )
elif PRODUCTION:
    raise ImproperlyConfigured(
        "KEEL_ENV=production needs DJANGO_SECRET_KEY: one long random value shared by every process."
    )
else:
    SECRET_KEY = secret_key_in(VAR_DIR)  # made once, kept in the var dir (0600), never in the repository
if PRODUCTION and not os.environ.get("DJANGO_ALLOWED_HOSTS"):
    raise ImproperlyConfigured("KEEL_ENV=production needs DJANGO_ALLOWED_HOSTS: the host names this site answers to.")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31536000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", PRODUCTION)
if env_bool("DJANGO_TRUST_X_FORWARDED_PROTO", False):
    # Only behind a proxy that terminates TLS and always sets (or strips) this header.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", PRODUCTION)
SESSION_COOKIE_AGE = env_int("DJANGO_SESSION_COOKIE_AGE", 12 * 3600 if PRODUCTION else 14 * 24 * 3600)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",  # runserver leaves static files to WhiteNoise, as gunicorn does
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "axes",
    "django_htmx",
    "template_partials",
    "ninja",  # django-ninja's bundled Swagger UI (static files), never the CDN copy
    "pgtrigger",
    "apikit",  # before every app whose ready() could import a router: the wrappers are shared first
    "accounts",
    "executions",
    "approvals",
    "triage",
    "schedules",
    "artifacts",
    "console",
    "cli",
    "metrics",
    "notifications",
    "retention",
    "fleet",
    "sandbox",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.NoStoreMiddleware",
    # Every HTML page, error pages included (config/csp.py; settings.CONTENT_SECURITY_POLICY overrides it).
    "config.csp.ContentSecurityPolicyMiddleware",
    "config.middleware.EdgeMiddleware",  # body size, content type, JSON errors under /api/
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every read of a request as its user: access by workflow (access.viewer, KEEL_WORKFLOW_ACCESS).
    "access.viewer.ViewerMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.HtmxLoginRedirectMiddleware",
    # A view that finds PostgreSQL or the broker gone answers 503 + Retry-After, not a 500.
    "config.middleware.UnavailableMiddleware",
    # Last: turns a locked-out login into the lockout page (django-axes).
    "axes.middleware.AxesMiddleware",
]
# How often a web process asks the replica whether it answers and how far behind it is;
# past how many seconds of lag a page says so (fleet/replica.py).
RUNTIME_REPLICA_RECHECK_SECONDS = float(os.environ.get("RUNTIME_REPLICA_RECHECK_SECONDS", "5"))
RUNTIME_REPLICA_LAG_SECONDS = float(os.environ.get("RUNTIME_REPLICA_LAG_SECONDS", "10"))

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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
                "console.context_processors.runtime",
                "metrics.context_processors.nav",
                "notifications.context_processors.mail",
                "fleet.replica.page_notice",
            ],
        },
    },
]

# --- The web server (docs/operations.md, "The web server"; config/asgi.py, config/admission.py,
# config/web_worker.py): how many requests of one web process are inside Django at once (each
# holds a database connection while it runs), how long a request body may send nothing before
# it is answered 408, how long a new connection may take to send a request's head.
KEEL_WEB_CONCURRENCY = env_int("KEEL_WEB_CONCURRENCY", 4)
KEEL_WEB_BODY_SECONDS = float(os.environ.get("KEEL_WEB_BODY_SECONDS") or 10)
KEEL_WEB_IDLE_SECONDS = float(os.environ.get("KEEL_WEB_IDLE_SECONDS") or 10)
if KEEL_WEB_CONCURRENCY < 1 or KEEL_WEB_BODY_SECONDS <= 0 or KEEL_WEB_IDLE_SECONDS <= 0:
    raise ImproperlyConfigured(
        "KEEL_WEB_CONCURRENCY must be at least 1, KEEL_WEB_BODY_SECONDS and KEEL_WEB_IDLE_SECONDS more than 0."
    )

# --- Database: PostgreSQL in production and tests, SQLite as the embedded default.
# How long a process keeps a database connection after using it (docs/operations.md, "Database
# connections"). Workers and beat keep theirs KEEL_DB_CONN_MAX_AGE seconds (default 600: a
# worker serves many tasks on one), checked before reuse. The web server (ASGI, which says so
# in config/asgi.py) closes each at the end of its request whatever that says: Django runs each
# ASGI request in a thread of its own, so a kept connection is never used again and piles up.
SERVES_ASGI = env_bool("KEEL_SERVES_ASGI", False)
CONN_MAX_AGE = 0 if SERVES_ASGI else env_int("KEEL_DB_CONN_MAX_AGE", 600)
if os.environ.get("DATABASE_URL"):
    # Checked before reuse, so a kept connection that died with a database restart is replaced
    # instead of failing a task.
    DATABASES = {
        "default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=CONN_MAX_AGE, conn_health_checks=True)
    }
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("KEEL_TEST_DB_NAME") or None}
    if os.environ.get("DATABASE_OWNER_URL"):
        # The owner of the tables (retention's purge; docs/operations.md, "Retention"). Without
        # it the purge uses ``default``, which then must be the owner.
        DATABASES["owner"] = dj_database_url.parse(os.environ["DATABASE_OWNER_URL"], conn_max_age=0)
        DATABASES["owner"]["TEST"] = {"MIRROR": "default"}
    # Through PgBouncer in transaction mode (issue 24, docs/operations.md "PgBouncer"): a
    # server connection is ours only for one transaction, so nothing may outlive one —
    # no server-side prepared statements (psycopg prepares a query run five times; PgBouncer
    # before 1.21 can't follow them) and no server-side cursors (a WITH HOLD cursor of
    # .iterator() lives in the session). Migrations and the owner role connect directly.
    DATABASE_POOL_MODE = os.environ.get("DATABASE_POOL_MODE", "session")
    if DATABASE_POOL_MODE not in ("session", "transaction"):
        raise ImproperlyConfigured("DATABASE_POOL_MODE is session (direct, the default) or transaction (PgBouncer)")
    if DATABASE_POOL_MODE == "transaction":
        DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = None
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    else:
        # The hot path's statements (executions.engine.compiled) are prepared once a
        # connection has run one 5 times; the ORM's own queries bind on the client and never are.
        DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 5
    # Replica reads (fleet/replica.py): the read-only pages read a streaming replica; the
    # rest, and every process but the web server's pages, the primary.
    if os.environ.get("DATABASE_REPLICA_URL"):
        DATABASES["replica"] = dj_database_url.parse(
            os.environ["DATABASE_REPLICA_URL"],
            conn_max_age=CONN_MAX_AGE,
            conn_health_checks=True,
        )
        DATABASES["replica"].setdefault("OPTIONS", {})["connect_timeout"] = 2
        if DATABASE_POOL_MODE == "transaction":
            DATABASES["replica"]["OPTIONS"]["prepare_threshold"] = None
            DATABASES["replica"]["DISABLE_SERVER_SIDE_CURSORS"] = True
        DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
        DATABASE_ROUTERS = ["fleet.replica.ReplicaRouter"]
        MIDDLEWARE.insert(MIDDLEWARE.index("config.middleware.UnavailableMiddleware"), "fleet.replica.ReplicaReads")
    # Django's PostgreSQL backend whose health check asks the socket, not the server, so a
    # task or a page doesn't start with a round trip (config/database/base.py).
    for _database in DATABASES.values():
        if _database["ENGINE"] == "django.db.backends.postgresql":
            _database["ENGINE"] = "config.database"
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "keel.sqlite3",
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Every password a person sets through a form (the admin, a password change): at least 12
# characters, not like the username or e-mail, not one of the 20,000 most common, not only digits.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# --- Login throttling (django-axes): after KEEL_LOGIN_FAILURE_LIMIT failed logins for one
# username from one address, that pair is locked out for KEEL_LOGIN_COOLOFF_MINUTES (each
# attempt meanwhile restarts the wait). Every failure is recorded in the database
# (axes' AccessAttempt and AccessFailureLog; successful logins in AccessLog).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("KEEL_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("KEEL_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
# Behind the documented proxy (docs/operations.md, "The web server"), the client's address is
# the one the last KEEL_TRUSTED_PROXY_COUNT proxies put in X-Forwarded-For: lockouts are per
# real client, so failures from one address can't lock an account for everyone behind the proxy.
KEEL_TRUSTED_PROXY_COUNT = env_int("KEEL_TRUSTED_PROXY_COUNT", 0)
AXES_CLIENT_IP_CALLABLE = "config.login.client_address"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files: `collectstatic` hashes and compresses them into STATIC_ROOT and WhiteNoise
# serves them from the application's own origin (far-future caching for hashed names).
# Until collectstatic has run, WhiteNoise serves the source folders (config/staticfiles.py).
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("KEEL_STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = not (STATIC_ROOT / "staticfiles.json").exists()

# --- Artifacts: one storage alias, filesystem by default, S3 through django-storages.
ARTIFACTS_ROOT = Path(os.environ.get("KEEL_ARTIFACTS_ROOT", VAR_DIR / "artifacts"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.staticfiles.StaticFilesStorage"},
    "artifacts": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(ARTIFACTS_ROOT)},
    },
}
if os.environ.get("KEEL_ARTIFACTS_S3_BUCKET"):
    # docs/artifacts.md: needs s3:PutObject, s3:GetObject and s3:ListBucket; s3:DeleteObject on
    # sha256/* only where the archive runs (the blob sweep), never for the web and step workers.
    STORAGES["artifacts"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ["KEEL_ARTIFACTS_S3_BUCKET"],
            "location": os.environ.get("KEEL_ARTIFACTS_S3_PREFIX", ""),
            "region_name": os.environ.get("KEEL_ARTIFACTS_S3_REGION") or None,  # else boto3's AWS_DEFAULT_REGION
            "endpoint_url": os.environ.get("KEEL_ARTIFACTS_S3_ENDPOINT_URL") or None,
            "file_overwrite": False,  # a taken key is never rewritten (the store never writes one anyway)
            "default_acl": None,  # private: bytes go out only through /artifacts/…/raw, verified
        },
    }

# --- Celery: Redis in production, the filesystem transport as the embedded default.
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem"):
    for sub in ("queue", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    # kombu's filesystem transport, but every message published whole (a reader could see
    # an empty file and stop the worker): config/broker_filesystem.py.
    CELERY_BROKER_TRANSPORT = "config.broker_filesystem:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        # kombu writes its control exchange to a relative control/ folder unless told.
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
else:
    # Far longer than any slice: the lease, not redelivery, decides who runs.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Two queues: ``celery`` for the steps (executions.advance) and ``control`` for what beat
# sends (the sweep, the metrics fold), so a sweep never waits behind a backlog of steps.
# A worker consumes both unless ``-Q`` names fewer (docs/operations.md, Processes).
CELERY_TASK_DEFAULT_QUEUE = "celery"


def _runtime_queues(raw: str) -> dict[str, list[str]]:
    """``RUNTIME_QUEUES``: JSON, queue name → selectors (``kind:model``, ``workflow:<name>``,
    ``step:<workflow>.<step>``); steps matching none stay on ``celery`` (issue 24,
    executions/engine/routing.py, docs/operations.md "Queues by kind of work")."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"RUNTIME_QUEUES is not JSON: {exc}") from exc
    if not isinstance(value, dict) or not all(
        isinstance(q, str) and q and isinstance(s, list) and all(isinstance(x, str) for x in s)
        for q, s in value.items()
    ):
        raise ImproperlyConfigured(
            'RUNTIME_QUEUES must map queue names to lists of selectors: {"agents": ["kind:agent"]}'
        )
    if "control" in value:
        raise ImproperlyConfigured("RUNTIME_QUEUES: the control queue carries only control tasks")
    return value


# Steps by kind of work on named queues (executions.engine.routing); empty: every step on ``celery``.
RUNTIME_QUEUES = _runtime_queues(os.environ.get("RUNTIME_QUEUES", ""))
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name), routing_key=name) for name in ("celery", "control", *sorted(RUNTIME_QUEUES))
]
CELERY_TASK_ROUTES = {
    "executions.sweep": {"queue": "control"},
    "executions.unheld": {"queue": "control"},
    "metrics.fold": {"queue": "control"},
    "triage.tally": {"queue": "control"},
    "notifications.sweep": {"queue": "control"},
    "schedules.tick": {"queue": "control"},
    "retention.archive": {"queue": "control"},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Runtime timing (docs/design.md §6).
RUNTIME_LEASE_SECONDS = env_int("RUNTIME_LEASE_SECONDS", 30)
# How stale a worker's view of the workflow kill switches may be at a step boundary
# (executions.engine.pauses): 0, the default, reads them before every step (one indexed read).
RUNTIME_SWITCH_RECHECK_SECONDS = float(os.environ.get("RUNTIME_SWITCH_RECHECK_SECONDS", "0"))
RUNTIME_SWEEP_SECONDS = float(
    os.environ.get("RUNTIME_SWEEP_SECONDS", "5")
)  # fractions too (the tests sweep twice a second)
# Beat's other control tasks (the metrics fold, the triage tally, the notification sweep and
# the schedules' tick) run this often: by default with the sweeper; the tests sweep twice a
# second but keep these at 2 s, where a tick costs more than it finds.
RUNTIME_HOUSEKEEPING_SECONDS = float(os.environ.get("RUNTIME_HOUSEKEEPING_SECONDS", str(RUNTIME_SWEEP_SECONDS)))
# A schedule may fire at most once every this many seconds: a cron expression whose firing
# times come closer is refused (422 naming cron; schedules.services.check_frequency).
RUNTIME_SCHEDULE_MIN_SECONDS = env_int("RUNTIME_SCHEDULE_MIN_SECONDS", 60)
if RUNTIME_SCHEDULE_MIN_SECONDS < 1:
    raise ImproperlyConfigured("RUNTIME_SCHEDULE_MIN_SECONDS must be at least 1 (seconds between two firings).")
# A slice ends well inside the lease and far inside the broker's visibility timeout.
RUNTIME_SLICE_SECONDS = env_int("RUNTIME_SLICE_SECONDS", max(1, RUNTIME_LEASE_SECONDS // 3))
# --- Retention (issue 23; docs/operations.md, "Retention"): history is kept this many days after
# an execution ends, then archived to the artifact storage and purged; beat's daily pass
# archives batches of RUNTIME_RETENTION_BATCH for at most RUNTIME_RETENTION_PASS_SECONDS.
RUNTIME_RETENTION_DAYS = env_int("RUNTIME_RETENTION_DAYS", 90)
RUNTIME_RETENTION_BATCH = env_int("RUNTIME_RETENTION_BATCH", 200)
RUNTIME_RETENTION_PASS_SECONDS = env_int("RUNTIME_RETENTION_PASS_SECONDS", 300)
RUNTIME_RETENTION_HOUR = env_int("RUNTIME_RETENTION_HOUR", 3)  # UTC hour of beat's daily pass
# The blob sweep after each archive pass removes a blob nothing names only once it was
# stored this long ago (a put whose version row has not committed yet keeps its bytes).
RUNTIME_BLOB_GRACE_HOURS = env_int("RUNTIME_BLOB_GRACE_HOURS", 24)

RUNTIME_WORKFLOW_MODULES = [
    m
    for m in os.environ.get(
        "RUNTIME_WORKFLOW_MODULES",
        "workflows.monthly_report,workflows.replacement_order,workflows.replacement_order_v2,workflows.support_agent,"
        "workflows.quarterly_report,workflows.support_chat",
    ).split(",")
    if m
]
# Modules of the team's own workflows (docs/design.md §4, "Authoring surface"), imported at
# start-up in addition to RUNTIME_WORKFLOW_MODULES; one that fails to import stops start-up.
KEEL_WORKFLOW_MODULES = [m.strip() for m in os.environ.get("KEEL_WORKFLOW_MODULES", "").split(",") if m.strip()]
# The model (docs/design.md §6, Agents): offline (deterministic, no network), openai (any
# OpenAI-compatible Chat Completions endpoint), anthropic (Messages API), or a class path.
RUNTIME_MODEL_CLIENT = os.environ.get("RUNTIME_MODEL_CLIENT", "offline")
RUNTIME_MODEL = os.environ.get("RUNTIME_MODEL", "")  # "" : the adapter's default model
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")  # "" : OpenAI's own
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "")  # "" : Anthropic's own
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
# How long one model call may take before it counts as a transient failure.
RUNTIME_MODEL_TIMEOUT_SECONDS = float(os.environ.get("RUNTIME_MODEL_TIMEOUT_SECONDS", "60"))
# The token budget of the context a prompt is built from (executions.authoring.notes.render).
RUNTIME_CONTEXT_TOKENS = env_int("RUNTIME_CONTEXT_TOKENS", 8000)


# What a model call costs (docs/design.md §6, Agents): JSON {"<model>": {"input_per_mtok": n,
# "output_per_mtok": n}}, USD per million tokens, looked up by the model requested, then
# by the model the provider says it used; a model without a price costs null
# (executions.engine.costs, docs/agents.md "Budgets").
def _model_prices(raw: str) -> dict[str, dict[str, float]]:
    try:
        prices = json.loads(raw or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"RUNTIME_MODEL_PRICES is not JSON: {exc}") from None
    ok = isinstance(prices, dict) and all(
        isinstance(price, dict)
        and all(
            isinstance(price.get(k), int | float) and not isinstance(price.get(k), bool) and price.get(k) >= 0
            for k in ("input_per_mtok", "output_per_mtok")
        )
        for price in prices.values()
    )
    if not ok:
        raise ImproperlyConfigured(
            'RUNTIME_MODEL_PRICES must be {"<model>": {"input_per_mtok": n, "output_per_mtok": n}} with n >= 0.'
        )
    return prices


RUNTIME_MODEL_PRICES = _model_prices(os.environ.get("RUNTIME_MODEL_PRICES", ""))


# Access by workflow (docs/operations.md "Access by workflow"): JSON {"<workflow>": {"read":
# [group], "start": [group], "decide": [group], "operate": [group]}}. A workflow named here
# is invisible to users in none of its groups; one not named stays open. The workflows and
# groups named are checked once the workflows are loaded (executions.access.check_names).
WORKFLOW_ACTS = ("read", "start", "decide", "operate")


def _workflow_access(raw: str) -> dict[str, dict[str, tuple[str, ...]]]:
    try:
        rules = json.loads(raw or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"KEEL_WORKFLOW_ACCESS is not JSON: {exc}") from None
    shape = 'KEEL_WORKFLOW_ACCESS must be {"<workflow>": {"read"|"start"|"decide"|"operate": ["<group>", ...]}}'
    if not isinstance(rules, dict):
        raise ImproperlyConfigured(f"{shape}, not {type(rules).__name__}.")
    parsed: dict[str, dict[str, tuple[str, ...]]] = {}
    for workflow, acts in rules.items():
        if not isinstance(acts, dict) or not acts:
            raise ImproperlyConfigured(f"{shape}: {workflow!r} names no acts.")
        unknown = sorted(set(acts) - set(WORKFLOW_ACTS))
        if unknown:
            raise ImproperlyConfigured(f"{shape}: {workflow!r} names the unknown act {unknown[0]!r}.")
        for act, groups in acts.items():
            if not isinstance(groups, list) or not all(isinstance(g, str) and g.strip() for g in groups):
                raise ImproperlyConfigured(f"{shape}: {workflow!r} {act!r} must be a list of group names.")
        parsed[workflow] = {act: tuple(acts.get(act, ())) for act in WORKFLOW_ACTS}
    return parsed


KEEL_WORKFLOW_ACCESS = _workflow_access(os.environ.get("KEEL_WORKFLOW_ACCESS", ""))


# Each model's context window in tokens (JSON {"<model>": n}, n >= 1000; a model not named:
# RUNTIME_MODEL_CONTEXT_WINDOW). An agent round's conversation past half its model's window
# is compacted before the next call (executions.agent.compaction, docs/agents.md).
def _context_windows(raw: str) -> dict[str, int]:
    try:
        windows = json.loads(raw or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"RUNTIME_MODEL_CONTEXT_WINDOWS is not JSON: {exc}") from None
    if not isinstance(windows, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1000 for n in windows.values()
    ):
        raise ImproperlyConfigured('RUNTIME_MODEL_CONTEXT_WINDOWS must be {"<model>": tokens} with tokens >= 1000.')
    return windows


RUNTIME_MODEL_CONTEXT_WINDOWS = _context_windows(os.environ.get("RUNTIME_MODEL_CONTEXT_WINDOWS", ""))
RUNTIME_MODEL_CONTEXT_WINDOW = env_int("RUNTIME_MODEL_CONTEXT_WINDOW", 128_000)
SANDBOX_URL = os.environ.get("SANDBOX_URL", "http://127.0.0.1:8765")
# How long an approval request stays open before it expires (the workflow decides what then).
APPROVAL_TTL_SECONDS = env_int("APPROVAL_TTL_SECONDS", 7 * 24 * 3600)
# How long an approval may wait before the triage console calls it overdue (approval_overdue).
APPROVAL_SLA_SECONDS = env_int("APPROVAL_SLA_SECONDS", 24 * 3600)
# Runnable but unclaimed for longer than this: no_worker (docs/design.md §4).
RUNTIME_STUCK_SECONDS = env_int("RUNTIME_STUCK_SECONDS", 60)
# How often beat's unheld check runs (executions.engine.sweeper.flag_unheld): it reads every
# parked row without a due time (80–150 ms at a million executions with 50,000 parked), so
# once a stuck-reason interval, not at every sweep.
RUNTIME_UNHELD_SECONDS = float(os.environ.get("RUNTIME_UNHELD_SECONDS", str(RUNTIME_STUCK_SECONDS)))
# The worker registry (fleet): a heartbeat row per worker process every this many seconds
# (one write), alive while seen within RUNTIME_WORKER_STALE_SECONDS, listed until
# RUNTIME_WORKER_FORGET_SECONDS (docs/design.md §6, Workers).
RUNTIME_WORKER_HEARTBEAT_SECONDS = float(os.environ.get("RUNTIME_WORKER_HEARTBEAT_SECONDS", "10"))
RUNTIME_WORKER_STALE_SECONDS = float(
    os.environ.get("RUNTIME_WORKER_STALE_SECONDS", str(3 * RUNTIME_WORKER_HEARTBEAT_SECONDS))
)
RUNTIME_WORKER_FORGET_SECONDS = env_int("RUNTIME_WORKER_FORGET_SECONDS", 3600)
# A step's timeout when neither the step nor its workflow names one.
RUNTIME_STEP_TIMEOUT_SECONDS = env_int("RUNTIME_STEP_TIMEOUT_SECONDS", 600)
# Whether the order service deduplicates on Idempotency-Key. The runtime can't tell, so
# it is configured: when false, an order whose outcome is unknown is only ever looked
# up by its reference, never re-sent blindly (an operator decides if the lookup can't).
ORDER_SERVICE_HONORS_KEYS = env_bool("ORDER_SERVICE_HONORS_KEYS", True)
# How long the runtime waits for an external service before the outcome becomes unknown.
RUNTIME_EFFECT_TIMEOUT_SECONDS = float(os.environ.get("RUNTIME_EFFECT_TIMEOUT_SECONDS", "10"))
# How often the dashboard polls live panels, in milliseconds.
DASHBOARD_POLL_MS = env_int("DASHBOARD_POLL_MS", 2000)
# How often the metrics page redraws its numbers and charts, in milliseconds.
METRICS_POLL_MS = env_int("METRICS_POLL_MS", 15000)
# A bearer token for Prometheus to scrape /metrics without a user (unset: users' tokens only).
RUNTIME_METRICS_TOKEN = os.environ.get("RUNTIME_METRICS_TOKEN", "")

# --- Notifications and webhooks (issue 22; docs/design.md §6 "Operations"; docs/operations.md
# "Mail and webhooks"). Production sends mail by SMTP when EMAIL_HOST is set; the
# embedded default writes each message to a file under var/mail/.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "keel <keel@localhost>")
EMAIL_TIMEOUT = RUNTIME_EFFECT_TIMEOUT_SECONDS  # an SMTP answer not back by then is a lost answer
EMAIL_FILE_PATH = str(VAR_DIR / "mail")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.filebased.EmailBackend"
)


def _http_url(name: str, value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that isn't one
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", value)  # never a password in the message
        raise ImproperlyConfigured(f"{name} must be an http:// or https:// URL with a host, not {shown!r}.")
    return value.rstrip("/")


# Links in messages are absolute: the dashboard as the people who read them reach it.
KEEL_BASE_URL = _http_url("KEEL_BASE_URL", os.environ.get("KEEL_BASE_URL", "http://127.0.0.1:8000"))
KEEL_WEBHOOK_URL = os.environ.get("KEEL_WEBHOOK_URL", "")
KEEL_WEBHOOK_SECRET = os.environ.get("KEEL_WEBHOOK_SECRET", "")
if KEEL_WEBHOOK_URL:
    KEEL_WEBHOOK_URL = _http_url("KEEL_WEBHOOK_URL", KEEL_WEBHOOK_URL)
    if not KEEL_WEBHOOK_SECRET:
        raise ImproperlyConfigured(
            "KEEL_WEBHOOK_URL is set but KEEL_WEBHOOK_SECRET is not: webhooks are always signed."
        )
# One reminder, this long after a request opened, while it is still pending.
RUNTIME_APPROVAL_REMIND_SECONDS = env_int("RUNTIME_APPROVAL_REMIND_SECONDS", 24 * 3600)
# An operator's "Remind the managers": at most one per request in this long (a second
# press within it sends nothing and says when the first went).
RUNTIME_APPROVAL_REMIND_AGAIN_SECONDS = env_int("RUNTIME_APPROVAL_REMIND_AGAIN_SECONDS", 3600)
# Whether approvals are told by e-mail at all (tests of other features turn it off).
KEEL_NOTIFICATIONS = env_bool("KEEL_NOTIFICATIONS", True)
# A send still `executing` after this long lost its sender (killed mid-call): an e-mail
# becomes unknown (never re-sent blindly), a webhook goes again with the same key.
RUNTIME_NOTIFY_CLAIM_SECONDS = float(
    os.environ.get("RUNTIME_NOTIFY_CLAIM_SECONDS", str(2 * RUNTIME_EFFECT_TIMEOUT_SECONDS + 5))
)

# --- Secrets (docs/operations.md, "What is redacted, and where"): every configured secret,
# by the name it is configured under, in one list. Whatever came from outside (a provider's
# error or body, a receipt, a tool result, a model's answer, a log line) is stripped of
# these values before it is stored or shown (executions.redaction), each replaced by
# ``[redacted: NAME]``. A database or broker URL contributes its password. Values shorter
# than REDACT_MIN_LENGTH are left out: they would redact ordinary words.
REDACT_MIN_LENGTH = 8


def _url_password(url: str) -> str:
    try:
        password = urlsplit(url).password
    except ValueError:
        return ""
    return unquote(password) if password else ""


# A hook URL's path and query this long carry a credential (Slack's, Teams', Discord's are
# 40–100 characters); a shorter one (``/hooks/keel``) is a route, and redacting it would hide
# every other URL with that path in the evidence (a redirect's target, another receiver).
HOOK_CREDENTIAL_MIN_LENGTH = 24


def _url_path_and_query(url: str) -> str:
    """Where a URL carries its credential when it is one (a Slack- or Teams-style hook:
    ``/services/T…/B…/…``): its path and query, without the leading slash, so a redacted
    URL keeps its scheme and host (``https://hooks.example/[redacted: KEEL_WEBHOOK_URL]``);
    "" when they are shorter than HOOK_CREDENTIAL_MIN_LENGTH."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    secret = parts.path.lstrip("/") + (f"?{parts.query}" if parts.query else "")
    return secret if len(secret) >= HOOK_CREDENTIAL_MIN_LENGTH else ""


SECRETS = {
    name: value
    for name, value in {
        "DJANGO_SECRET_KEY": SECRET_KEY,
        "OPENAI_API_KEY": OPENAI_API_KEY,
        "ANTHROPIC_API_KEY": ANTHROPIC_API_KEY,
        "RUNTIME_METRICS_TOKEN": RUNTIME_METRICS_TOKEN,
        "EMAIL_HOST_PASSWORD": EMAIL_HOST_PASSWORD,
        "KEEL_WEBHOOK_SECRET": KEEL_WEBHOOK_SECRET,
        "KEEL_WEBHOOK_URL": _url_path_and_query(KEEL_WEBHOOK_URL),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        "DATABASE_URL": _url_password(os.environ.get("DATABASE_URL", "")),
        "DATABASE_OWNER_URL": _url_password(os.environ.get("DATABASE_OWNER_URL", "")),
        "CELERY_BROKER_URL": _url_password(CELERY_BROKER_URL),
    }.items()
    if value and len(value) >= REDACT_MIN_LENGTH
}

# --- Single sign-on through OpenID Connect (docs/operations.md, "Single sign-on"; accounts/sso/),
# off unless OIDC_ISSUER is set. The provider's endpoints come from its discovery document at
# the first sign-in, never at start-up: keel starts while the provider is down. At every
# sign-in the user's groups follow OIDC_GROUPS_CLAIM through OIDC_ROLE_MAP (JSON {"<provider
# group>": "managers"|"operators"|"auditors"}) and the group names KEEL_WORKFLOW_ACCESS uses
# (accounts.identities). KEEL_PASSWORD_LOGIN=off leaves single sign-on the only way in for people.
OIDC_ROLES = ("managers", "operators", "auditors")
_JSON_TYPES = {"list": "an array", "str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}


def _oidc_role_map(raw: str) -> tuple[dict[str, str], dict[str, object]]:
    """The map, and the entries it leaves out because their value is no role (accounts.apps warns of each)."""
    try:
        mapping = json.loads(raw or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"OIDC_ROLE_MAP is not JSON: {exc}") from None
    if not isinstance(mapping, dict):
        raise ImproperlyConfigured(
            'OIDC_ROLE_MAP must be a JSON object {"<provider group>": "managers"|"operators"|"auditors"}, '
            f"not {_JSON_TYPES.get(type(mapping).__name__, 'null')}."
        )
    roles = {group: role for group, role in mapping.items() if isinstance(role, str) and role in OIDC_ROLES}
    return roles, {group: role for group, role in mapping.items() if group not in roles}


OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").strip()
OIDC_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "").strip()
OIDC_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "").strip()
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "").strip() or "groups"
OIDC_SCOPES = os.environ.get("OIDC_SCOPES", "").strip() or "openid email profile"
OIDC_ROLE_MAP, OIDC_ROLE_MAP_IGNORED = _oidc_role_map(os.environ.get("OIDC_ROLE_MAP", ""))
if OIDC_ISSUER:
    _http_url("OIDC_ISSUER", OIDC_ISSUER)  # checked, and kept as written: the ID token's iss must equal it
    _missing = [
        name
        for name, value in (("OIDC_CLIENT_ID", OIDC_CLIENT_ID), ("OIDC_CLIENT_SECRET", OIDC_CLIENT_SECRET))
        if not value
    ]
    if _missing:
        raise ImproperlyConfigured(
            f"OIDC_ISSUER is set but {' and '.join(_missing)} {'is' if len(_missing) == 1 else 'are'} not: "
            "register keel at the provider as a confidential client and give its client id and secret."
        )
    AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "accounts.sso.backend.ProviderBackend"]
    if len(OIDC_CLIENT_SECRET) >= REDACT_MIN_LENGTH:
        SECRETS["OIDC_CLIENT_SECRET"] = OIDC_CLIENT_SECRET
KEEL_PASSWORD_LOGIN = env_bool("KEEL_PASSWORD_LOGIN", True)
if not KEEL_PASSWORD_LOGIN and not OIDC_ISSUER:
    raise ImproperlyConfigured(
        "KEEL_PASSWORD_LOGIN=off needs OIDC_ISSUER: without single sign-on nobody could sign in to the dashboard."
    )
# What mozilla-django-oidc reads, by its own names (accounts/sso/ gives it the endpoints from
# discovery): the authorization code flow with state, nonce and PKCE; ID tokens signed RS256.
OIDC_RP_CLIENT_ID = OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = OIDC_CLIENT_SECRET
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_RP_SCOPES = OIDC_SCOPES
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10  # seconds for each call to the provider (discovery, keys, token, userinfo)

# Every line a worker writes inside a slice names the execution, the step and the lease
# token (executions.engine.logcontext); KEEL_LOG_FORMAT=json writes one JSON object per line.
KEEL_LOG_FORMAT = os.environ.get("KEEL_LOG_FORMAT", "plain").strip().lower()
if KEEL_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"KEEL_LOG_FORMAT must be 'plain' or 'json', not {KEEL_LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "slice": {"()": "executions.engine.logcontext.SliceFilter"},
        "redact": {"()": "executions.redaction.RedactingFilter"},  # no configured secret in a log line
        "refusals": {"()": "config.log_filters.RefusalsWithoutTraceback"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s%(slice)s %(message)s"},
        "json": {"()": "executions.engine.logcontext.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": KEEL_LOG_FORMAT, "filters": ["slice", "redact"]}
    },
    "root": {"handlers": ["console"], "level": os.environ.get("KEEL_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.server": {"level": "WARNING"},
        "django.request": {"filters": ["refusals"]},  # a 403 is one line, not a traceback
        "kombu.connection": {"level": "ERROR"},  # "No hostname was supplied" for filesystem://
        "executions": {"level": "INFO"},
        "approvals": {"level": "INFO"},
    },
}


# --- Traces and errors (docs/operations.md, "Traces and errors"), off until configured.
# OpenTelemetry: the standard variables; the exporter reads the rest itself (headers,
# timeout, certificate). The endpoint is checked here so a typo stops start-up with one
# sentence instead of spans dropped in silence.
def _otlp_endpoint() -> str:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = os.environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise ImproperlyConfigured(
                f"{name}={protocol}: keel exports traces over OTLP/HTTP with protobuf only (http/protobuf); "
                "point it at the collector's HTTP port (4318)."
            )
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        value = os.environ.get(name, "").strip()
        if value:
            return _http_url(name, value)
    return ""


OTEL_ENDPOINT = _otlp_endpoint()
TRACING = (
    bool(OTEL_ENDPOINT)
    and not env_bool("OTEL_SDK_DISABLED", False)
    and os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
)
OTEL_SERVICE_NAME = os.environ.get("OTEL_SERVICE_NAME", "").strip() or "keel"
KEEL_TRACE_CONTENT = env_bool("KEEL_TRACE_CONTENT", False)  # prompts and answers on the model spans
# A link from the execution page to the team's trace viewer, e.g.
# https://grafana.example/explore?…{trace_id}… or http://jaeger:16686/trace/{trace_id}
KEEL_TRACE_URL = os.environ.get("KEEL_TRACE_URL", "").strip()
if KEEL_TRACE_URL:
    KEEL_TRACE_URL = _http_url("KEEL_TRACE_URL", KEEL_TRACE_URL)
    if "{trace_id}" not in KEEL_TRACE_URL:
        raise ImproperlyConfigured(
            f"KEEL_TRACE_URL must say where the trace id goes ({{trace_id}}): {KEEL_TRACE_URL!r}."
        )
SENTRY_DSN = os.environ.get("SENTRY_DSN", "").strip()
if SENTRY_DSN:
    from sentry_sdk.utils import BadDsn, Dsn

    try:
        SENTRY_KEY = Dsn(SENTRY_DSN).public_key
    except (BadDsn, ValueError) as exc:  # a port that isn't one is a ValueError
        raise ImproperlyConfigured(
            f"SENTRY_DSN is not a Sentry DSN ({exc}): copy it from the project's Client Keys, "
            "e.g. https://<key>@o0.ingest.sentry.io/<project>."
        ) from None
# The keys these senders carry are secrets like the others (executions.redaction): the
# collector's headers (a hosted backend's API key) and the DSN's key.
_OTLP_HEADERS = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")
for _name, _value in {
    **{
        f"OTEL_EXPORTER_OTLP_HEADERS ({header.split('=', 1)[0].strip()})": unquote(header.split("=", 1)[1].strip())
        for header in _OTLP_HEADERS.split(",")
        if "=" in header
    },
    "SENTRY_DSN": SENTRY_KEY if SENTRY_DSN else "",
}.items():
    if _value and len(_value) >= REDACT_MIN_LENGTH:
        SECRETS[_name] = _value
