"""Settings shared by every opsconsole process (web, worker, controller, beat).

Everything that differs between machines is read from the environment, with defaults that give the
embedded setup: a SQLite file in the data folder, the Redis on 127.0.0.1, the kubeconfig that kubesim writes.
`opsconsole.settings_production` tightens these for a real deployment.
"""

import json
import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(__file__).resolve().parent
#: run from a checkout (manage.py beside the packages), else installed from the wheel (site-packages)
CHECKOUT = (BASE_DIR / "manage.py").is_file()
#: the web assets: `templates/` and `static/` at the top of a checkout; the wheel carries them inside the package
#: (opsconsole/templates, opsconsole/static: setup.py's build step copies them there)
ASSETS_DIR = PACKAGE_DIR if (PACKAGE_DIR / "templates").is_dir() else BASE_DIR
_INSTALLED_DATA = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "opsconsole"
DATA_DIR = Path(os.environ.get("OPSCONSOLE_DATA_DIR", BASE_DIR / "data" if CHECKOUT else _INSTALLED_DATA))


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean from the environment: 1/true/yes/on are true, 0/false/no/off are false."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_number(name: str, default: float, kind: type[int] | type[float] = float) -> Any:
    """Read an int or float from the environment; a malformed value stops start-up with its name."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return kind(default)
    try:
        return kind(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a{'n integer' if kind is int else ' number'}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    """Read a comma-separated list from the environment."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def _local_secret_key() -> str:
    """A per-installation key kept in the data folder, so no shared constant ever signs sessions."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or _local_secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "opsconsole.apps.OpsconsoleConfig",  # creates the Celery app as Django starts
    "reconcilers",
    "opsconsole.console",
    "opsconsole.api",
    "opsconsole.accounts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "opsconsole.console.views.login.LoginAddressThrottleMiddleware",  # one address's many failed logins: 429
    "axes.middleware.AxesMiddleware",  # last: turns a login refused during a lockout into its answer
]

ROOT_URLCONF = "opsconsole.urls"
WSGI_APPLICATION = "opsconsole.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [ASSETS_DIR / "templates"],
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

# Database: a SQLite file in the data folder unless DATABASE_URL names another (PostgreSQL for real use).
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'opsconsole.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Worker processes started by the tests must see the test database, so it is a file, not :memory:.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-opsconsole.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # The engine's hot statements (the run's one-statement record, the state read, the controller's mirror upsert,
    # reconcilers.engine.recording_sql) are bound by the server and prepared on each connection after this many
    # executions, and planned for any values (plan_cache_mode=force_generic_plan: left to itself PostgreSQL goes on
    # planning these key lookups for each execution's values, which costs more than running them): PostgreSQL then
    # parses and plans them once per connection, not per run. Django's own queries are bound on the client and never
    # prepared, so the plan mode does not touch them. "off" for a transaction-mode pooler that does not keep
    # prepared statements (PgBouncer before 1.21, or without max_prepared_statements) and takes no startup options.
    _prepare = os.environ.get("OPSCONSOLE_DB_PREPARE_THRESHOLD", "2").strip().lower()
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options["prepare_threshold"] = None if _prepare in ("off", "none", "") else int(_prepare)
    if _options["prepare_threshold"] is not None and "plan_cache_mode" not in _options.get("options", ""):
        _options["options"] = f"{_options.get('options', '')} -c plan_cache_mode=force_generic_plan".strip()
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Failed logins (django-axes): per account, OPSCONSOLE_LOGIN_FAILURE_LIMIT failures (5) of one username, from
# any address, lock that account out for OPSCONSOLE_LOGIN_LOCKOUT_MINUTES (15), counted in the database (axes'
# tables) and recorded as auth.login_failed / auth.locked_out actions; the login page says why. One address is
# throttled apart from that, far higher and without a lockout (opsconsole.accounts.login_throttle): from its
# OPSCONSOLE_LOGIN_ADDRESS_LIMIT-th failure (50) in OPSCONSOLE_LOGIN_ADDRESS_WINDOW seconds (60) it waits for the
# window's end. Token auth (the API) does not go through Django's authenticate and is not affected.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("OPSCONSOLE_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("OPSCONSOLE_LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = ["username"]
AXES_CLIENT_IP_CALLABLE = "opsconsole.accounts.client_address.client_address"
OPSCONSOLE_LOGIN_ADDRESS_LIMIT = int(os.environ.get("OPSCONSOLE_LOGIN_ADDRESS_LIMIT", "50"))
OPSCONSOLE_LOGIN_ADDRESS_WINDOW = int(os.environ.get("OPSCONSOLE_LOGIN_ADDRESS_WINDOW", "60"))
# The proxies (CIDRs, comma-separated) whose X-Forwarded-For names the client (the Ingress controller's Pods);
# empty: REMOTE_ADDR is the client. Read right to left, skipping these hops (opsconsole.accounts.client_address).
OPSCONSOLE_TRUSTED_PROXIES = [c.strip() for c in os.environ.get("OPSCONSOLE_TRUSTED_PROXIES", "").split(",")
                              if c.strip()]
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # attempts during a lockout are refused, not counted
AXES_LOCKOUT_CALLABLE = "opsconsole.console.views.login.login_locked_out"
# axes logs "AXES: BEGIN version …" at every start when verbose: every manage.py command printed it
AXES_VERBOSE = False
# axes.W006 warns that a lockout without 'ip_address' lets an attacker rotate addresses past it; here the lockout
# is per account on purpose (an address shared behind a proxy must not lock real users out), and the address is
# throttled apart (opsconsole.accounts.login_throttle), so the warning names a risk that is covered.
SILENCED_SYSTEM_CHECKS = ["axes.W006"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [ASSETS_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles" if CHECKOUT else DATA_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise expects it even when serving from finders
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "opsconsole.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "opsconsole.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["opsconsole.api.permissions.IsViewer"],
    "DEFAULT_PAGINATION_CLASS": "opsconsole.api.pagination.IdCursorPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "opsconsole.api.exceptions.exception_handler",
    "DEFAULT_THROTTLE_RATES": {"actions": os.environ.get("OPSCONSOLE_API_ACTION_RATE", "60/min")},
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "opsconsole API",
    "DESCRIPTION": "Status of Kubernetes custom resources, their audited transitions, and manual reconciles.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
}

# Redis: the broker, the workqueue and the leases. Defaults to the Redis on 127.0.0.1.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

# Celery: at-least-once delivery (docs/architecture.md, Semantics). The visibility timeout must exceed the longest task.
CELERY_TASK_TIME_LIMIT = env_number("CELERY_TASK_TIME_LIMIT", 600, int)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT * 6}
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT * 6}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False  # workers log through LOGGING too (JSON, redaction)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("OPSCONSOLE_CELERY_QUEUE", "opsconsole")
# Celery's Django fixup closes the database connection around every task unless this is set; with it, a worker
# keeps its connection (CONN_MAX_AGE and health checks still apply: see opsconsole.celery's task_prerun hook).
CELERY_DB_REUSE_MAX = 1000

# Kubernetes: KUBECONFIG when set, in-cluster config inside a Pod, else the kubeconfig kubesim writes.
KUBECONFIG = os.environ.get("KUBECONFIG") or None
KUBESIM_KUBECONFIG = DATA_DIR / "kubeconfig"

# Observability: each is off (no-op, zero cost) unless configured.
PROMETHEUS_URL = os.environ.get("PROMETHEUS_URL") or None
OTEL_EXPORTER_OTLP_ENDPOINT = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
OPSCONSOLE_TRACE_UI_URL = os.environ.get("OPSCONSOLE_TRACE_UI_URL", "")  # e.g. http://jaeger:16686/trace/{trace_id}
# Graphviz's dot, which lays out the console's state machine diagrams (a simpler layout without it)
OPSCONSOLE_DOT_PATH = os.environ.get("OPSCONSOLE_DOT_PATH", "dot")
# Spans go to the database span store (the console's trace view) unless OPSCONSOLE_TRACING=off.
OPSCONSOLE_TRACING = os.environ.get("OPSCONSOLE_TRACING", "on")
# Head sampling of the controller's and workers' traces (reconcilers.engine.sampling): the share of reconciles
# traced in full; a run that ended in an error, took OPSCONSOLE_TRACE_SLOW_SECONDS or more, or handled a manual
# request is always kept (one span when it was not sampled). The web process traces every request.
OPSCONSOLE_TRACE_SAMPLE_RATIO = env_number("OPSCONSOLE_TRACE_SAMPLE_RATIO", 0.1)
OPSCONSOLE_TRACE_SLOW_SECONDS = env_number("OPSCONSOLE_TRACE_SLOW_SECONDS", 1.0)
OPSCONSOLE_SPAN_RETENTION_HOURS = env_number("OPSCONSOLE_SPAN_RETENTION_HOURS", 168)
OPSCONSOLE_EVENT_ARCHIVE = env_bool("OPSCONSOLE_EVENT_ARCHIVE", True)  # the controller archives Kubernetes Events
OPSCONSOLE_EVENT_RETENTION_DAYS = env_number("OPSCONSOLE_EVENT_RETENTION_DAYS", 30)  # `retention`'s default; 0 keeps
# `retention` drops the inputs kept with runs for a replay after this many days (the rows stay, "gone")
OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS = env_number("OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS", 14)
# Self-healing (docs/healing.md): the controller's healing step every OPSCONSOLE_HEALING_INTERVAL seconds (0: off);
# the default anomaly rules (a JSON list of rule objects; unset: the built-in backoff, flapping and stuck rules);
# per-kind overrides (a JSON object {"<Kind>": {"auto_rollback": true, "rollback_after_seconds": 120, ...}}).
OPSCONSOLE_HEALING_INTERVAL = env_number("OPSCONSOLE_HEALING_INTERVAL", 2)
OPSCONSOLE_ANOMALY_RULES = json.loads(os.environ["OPSCONSOLE_ANOMALY_RULES"]) \
    if os.environ.get("OPSCONSOLE_ANOMALY_RULES") else None
OPSCONSOLE_HEALING = json.loads(os.environ.get("OPSCONSOLE_HEALING") or "{}")
# After an automatic rollback, a re-apply of the same spec is rolled back again only after this back-off (seconds,
# doubling per repeat); the second repeat goes to a person (docs/healing.md, No fights).
OPSCONSOLE_ROLLBACK_BACKOFF_SECONDS = env_number("OPSCONSOLE_ROLLBACK_BACKOFF_SECONDS", 300)
# A metric rule's query waits at most this many seconds for PROMETHEUS_URL (docs/healing.md, Metric rules).
OPSCONSOLE_METRIC_RULES_TIMEOUT = env_number("OPSCONSOLE_METRIC_RULES_TIMEOUT", 3)
# Notifications of the healing records that need a person (docs/healing.md, Notifications): a JSON list of receivers
# [{"name", "url", "format": "alertmanager"|"json", "headers": {...}, "timeout", "retries", "backoff"}]; the
# healing step sends at most OPSCONSOLE_NOTIFICATION_BATCH per step, for OPSCONSOLE_NOTIFICATION_STEP_SECONDS at
# most; OPSCONSOLE_CONSOLE_URL (the console's address as people reach it) makes the links they carry.
OPSCONSOLE_NOTIFICATIONS = json.loads(os.environ.get("OPSCONSOLE_NOTIFICATIONS") or "[]")
OPSCONSOLE_NOTIFICATION_BATCH = env_number("OPSCONSOLE_NOTIFICATION_BATCH", 10, int)
OPSCONSOLE_NOTIFICATION_STEP_SECONDS = env_number("OPSCONSOLE_NOTIFICATION_STEP_SECONDS", 5)
OPSCONSOLE_CONSOLE_URL = os.environ.get("OPSCONSOLE_CONSOLE_URL", "")
# /metrics of a worker host (aggregate of its prefork children) and of the controller; 0 turns one off.
OPSCONSOLE_METRICS_ADDR = os.environ.get("OPSCONSOLE_METRICS_ADDR", "127.0.0.1")
OPSCONSOLE_WORKER_METRICS_PORT = env_number("OPSCONSOLE_WORKER_METRICS_PORT", 9101, int)
OPSCONSOLE_CONTROLLER_METRICS_PORT = env_number("OPSCONSOLE_CONTROLLER_METRICS_PORT", 9102, int)

# The kinds this installation runs (reconcilers.engine.registry): the built-in ones (Memcached, Tenant) unless
# turned off, those installed packages declare as Python entry points (group "opsconsole.kinds") unless turned
# off, and those named here by dotted path (`package.module.ClassName`, comma-separated in the environment).
OPSCONSOLE_RECONCILERS = env_list("OPSCONSOLE_RECONCILERS", [])
OPSCONSOLE_BUILTIN_KINDS = env_bool("OPSCONSOLE_BUILTIN_KINDS", True)
OPSCONSOLE_KIND_ENTRY_POINTS = env_bool("OPSCONSOLE_KIND_ENTRY_POINTS", True)

# The admission webhooks' decisions wait in Redis until written (opsconsole.webhooks.recorder): the queue's name
# (empty: derived from the database) and how long a killed server's decision in flight waits for another.
OPSCONSOLE_ADMISSION_QUEUE = os.environ.get("OPSCONSOLE_ADMISSION_QUEUE", "")
OPSCONSOLE_ADMISSION_LEASE_SECONDS = env_number("OPSCONSOLE_ADMISSION_LEASE_SECONDS", 30, int)

# The workqueue in Redis (docs/architecture.md, the workqueue); defaults are controller-runtime's.
# Empty: the Celery queue's name, read at run time (a private Celery queue gets a private workqueue).
OPSCONSOLE_WORKQUEUE_NAME = os.environ.get("OPSCONSOLE_WORKQUEUE_NAME", "")
OPSCONSOLE_WORKQUEUE_LEASE_SECONDS = env_number("OPSCONSOLE_WORKQUEUE_LEASE_SECONDS", 30)
OPSCONSOLE_WORKQUEUE_BACKOFF_BASE = env_number("OPSCONSOLE_WORKQUEUE_BACKOFF_BASE", 0.005)
OPSCONSOLE_WORKQUEUE_BACKOFF_CAP = env_number("OPSCONSOLE_WORKQUEUE_BACKOFF_CAP", 1000)
OPSCONSOLE_WORKQUEUE_QPS = env_number("OPSCONSOLE_WORKQUEUE_QPS", 10)
OPSCONSOLE_WORKQUEUE_BURST = env_number("OPSCONSOLE_WORKQUEUE_BURST", 100, int)
OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER = env_number("OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER", 300)
# a key dispatched but claimed by no worker within this many seconds is sent again (the wait doubles per copy,
# up to OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER): a task lost with a killed controller strands nothing
OPSCONSOLE_WORKQUEUE_UNCLAIMED_AFTER = env_number("OPSCONSOLE_WORKQUEUE_UNCLAIMED_AFTER", 5)
# keys sent to Celery and not yet claimed, at most (0: no cap); the others wait ready, and a worker that finished
# its key runs the longest-waiting keys in the same task (up to OPSCONSOLE_DRAIN_KEYS keys or
# OPSCONSOLE_DRAIN_SECONDS): one message per batch
OPSCONSOLE_WORKQUEUE_MAX_SENT = env_number("OPSCONSOLE_WORKQUEUE_MAX_SENT", 32, int)
OPSCONSOLE_DRAIN_KEYS = env_number("OPSCONSOLE_DRAIN_KEYS", 100, int)
OPSCONSOLE_DRAIN_SECONDS = env_number("OPSCONSOLE_DRAIN_SECONDS", 20)
# keys a draining task runs at once, on threads of its worker process (while one run waits on the API or the
# database, another uses the CPU); one on SQLite, which lets one writer in at a time anyway
OPSCONSOLE_DRAIN_THREADS = env_number(
    "OPSCONSOLE_DRAIN_THREADS", 1 if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3" else 4, int)
# seconds a draining task waits idle for the next key after its last one (0: it does not): a key that becomes ready
# meanwhile is held for it and wakes it, no Celery message sent (at a steady trickle of changes, most keys). A
# lingering task holds its worker process, so at most concurrency - 1 processes of a worker node linger at once (one
# stays free for a task the node is sent: a manual request, a released RequeueAfter); a worker of one process never
# lingers. Keep it short: a warm shutdown waits for a lingering task too
OPSCONSOLE_DRAIN_LINGER_SECONDS = env_number("OPSCONSOLE_DRAIN_LINGER_SECONDS", 2.0)

# The controller: periodic resync of every key (each key once per period, spread evenly over it: 10 h by default, as
# controller-runtime's SyncPeriod; 0: none; a kind's Reconciler.resync_seconds overrides it) and leader election
# through a coordination.k8s.io Lease (client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry).
# The operator version each run records (reconcilers.engine.versions): the image tag or revision the deployment
# knows; empty: the distribution that provides the kind's code and its version.
OPSCONSOLE_OPERATOR_VERSION = os.environ.get("OPSCONSOLE_OPERATOR_VERSION", "")
OPSCONSOLE_RESYNC_SECONDS = env_number("OPSCONSOLE_RESYNC_SECONDS", 36000)
# Flux's manual-reconcile annotation reconcile.fluxcd.io/requestedAt is honoured like opsconsole's own.
OPSCONSOLE_FLUX_REQUESTED_AT = env_bool("OPSCONSOLE_FLUX_REQUESTED_AT", True)
OPSCONSOLE_LEADER_NAMESPACE = os.environ.get("OPSCONSOLE_LEADER_NAMESPACE", "default")
# The controller's Lease: a standby takes over 7-10 s after the leader's SIGKILL (docs/operations.md, "Lease timings")
OPSCONSOLE_LEADER_LEASE_SECONDS = env_number("OPSCONSOLE_LEADER_LEASE_SECONDS", 8)
OPSCONSOLE_LEADER_RENEW_DEADLINE_SECONDS = env_number("OPSCONSOLE_LEADER_RENEW_DEADLINE_SECONDS", 6)
OPSCONSOLE_LEADER_RETRY_SECONDS = env_number("OPSCONSOLE_LEADER_RETRY_SECONDS", 1)
# hot: a controller that does not lead keeps its informers listed and watching (reconcilers.engine.controller.standby)
OPSCONSOLE_STANDBY = os.environ.get("OPSCONSOLE_STANDBY", "hot")
# How often a cluster's leading controller reports its health on the cluster's row (reconcilers.engine.clusters); the
# console shows a cluster unreachable after three intervals without a report, so every process needs the same value
OPSCONSOLE_CLUSTER_HEALTH_SECONDS = env_number("OPSCONSOLE_CLUSTER_HEALTH_SECONDS", 5.0)

# Signed checkpoints of the audit record (reconcilers.engine.checkpoint): the Ed25519 key's PEM file (not in the
# database; in Kubernetes a mounted Secret; created with mode 0600 when missing), the directory of checkpoint
# files, the ConfigMap (in the leader namespace) and how often the leading controller writes one (0: never).
OPSCONSOLE_AUDIT_KEY_FILE = os.environ.get("OPSCONSOLE_AUDIT_KEY_FILE", str(DATA_DIR / "audit-signing.key"))
OPSCONSOLE_AUDIT_CHECKPOINT_DIR = os.environ.get("OPSCONSOLE_AUDIT_CHECKPOINT_DIR",
                                                 str(DATA_DIR / "audit-checkpoints"))
OPSCONSOLE_AUDIT_CHECKPOINT_CONFIGMAP = os.environ.get("OPSCONSOLE_AUDIT_CHECKPOINT_CONFIGMAP",
                                                       "opsconsole-audit-checkpoint")
OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS = env_number("OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS", 300)

# API: the limits of one export and of one bulk reconcile, and the readiness probe's timeouts.
OPSCONSOLE_API_EXPORT_MAX_ROWS = env_number("OPSCONSOLE_API_EXPORT_MAX_ROWS", 100000, int)
OPSCONSOLE_API_BULK_MAX = env_number("OPSCONSOLE_API_BULK_MAX", 500, int)
OPSCONSOLE_READYZ_TIMEOUT_SECONDS = env_number("OPSCONSOLE_READYZ_TIMEOUT_SECONDS", 2)

# Logs: LOG_FORMAT=plain (default here) or json (one object per line with trace_id/span_id; production's
# default); every record passes the redacting filter (tokens, credentials, Secret data) first.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "opsconsole.logging.RedactingFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "opsconsole.logging.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
