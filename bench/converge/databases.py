"""The benchmark's PostgreSQL databases (a migrated template, a clone per opsconsole scenario, dropped after) and
Redis database, and what it reads back from them."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

from .procs import ROOT
from .results import Config


def database_url(admin_url: str, name: str) -> str:
    """`admin_url` with its database replaced by `name`."""
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _admin(cfg: Config, *statements: str) -> None:
    import psycopg

    with psycopg.connect(cfg.pg_url, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)  # type: ignore[arg-type]


def prepare_template(cfg: Config) -> str:
    """A freshly migrated database that every opsconsole scenario's database is cloned from."""
    name = f"{cfg.db_prefix}_template"
    _admin(cfg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": database_url(cfg.pg_url, name),
           "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "OPSCONSOLE_DATA_DIR": str(cfg.data_dir),
           "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    return name


def fresh_database(cfg: Config, template: str, scenario: str) -> str:
    name = f"{cfg.db_prefix}_{scenario.replace('-', '_')}"
    _admin(cfg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


def drop_database(cfg: Config, name: str) -> None:
    _admin(cfg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def db_commits(cfg: Config, name: str) -> int:
    import psycopg

    with psycopg.connect(cfg.pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


def resources_by_cluster(cfg: Config, name: str) -> dict[str, int]:
    """The scenario database's Resource rows by cluster."""
    import psycopg

    with psycopg.connect(database_url(cfg.pg_url, name)) as conn:
        rows = conn.execute("SELECT cluster, count(*) FROM reconcilers_resource GROUP BY cluster ORDER BY cluster")
        return {str(c): int(n) for c, n in rows.fetchall()}


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()
