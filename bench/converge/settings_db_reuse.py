"""An experiment for `--opsconsole-env DJANGO_SETTINGS_MODULE=bench.converge.settings_db_reuse`: opsconsole's
settings plus `CELERY_DB_REUSE_MAX`, so that Celery's Django fixup stops closing the database connection
after every task (without it, each reconcile opens a new PostgreSQL connection, whatever CONN_MAX_AGE says)."""

from opsconsole.settings import *  # noqa: F401,F403

CELERY_DB_REUSE_MAX = 1000
