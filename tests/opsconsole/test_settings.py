"""Settings load both ways (SQLite by default, PostgreSQL from DATABASE_URL) and production tightens them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PG_URL = os.environ.get("DATABASE_URL", "")
if not PG_URL.startswith("postgres"):
    PG_URL = "postgres://postgres@127.0.0.1:5432/test"

PROBE = """
import json, django
from django.conf import settings
django.setup()
from django.db import connection
out = {"engine": settings.DATABASES["default"]["ENGINE"], "name": str(settings.DATABASES["default"]["NAME"]),
       "debug": settings.DEBUG, "hsts": getattr(settings, "SECURE_HSTS_SECONDS", 0),
       "secure_cookie": settings.SESSION_COOKIE_SECURE}
if CONNECT:
    connection.ensure_connection()
    with connection.cursor() as cur:
        cur.execute("select 1")
        out["select"] = cur.fetchone()[0]
        if connection.vendor == "postgresql":
            cur.execute("SHOW plan_cache_mode")
            out["plan_cache_mode"] = cur.fetchone()[0]
out["prepare_threshold"] = settings.DATABASES["default"].get("OPTIONS", {}).get("prepare_threshold", "unset")
print(json.dumps(out))
"""


def load(env: dict[str, str], *, connect: bool = False, module: str = "opsconsole.settings") -> dict:
    """Import the settings in a fresh interpreter with exactly this environment and report them."""
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "SECRET_KEY", "DEBUG"}}
    base.update(env)
    base["DJANGO_SETTINGS_MODULE"] = module
    proc = subprocess.run(
        [sys.executable, "-c", f"CONNECT={connect}\n{PROBE}"], cwd=ROOT, env=base, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def postgres_reachable() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
        return True
    except OSError:
        return False


def test_without_database_url_it_uses_a_sqlite_file_in_the_data_folder(tmp_path: Path) -> None:
    out = load({"OPSCONSOLE_DATA_DIR": str(tmp_path)}, connect=True)
    assert out["engine"] == "django.db.backends.sqlite3"
    assert out["name"] == str(tmp_path / "opsconsole.sqlite3")
    assert out["select"] == 1
    assert out["debug"] is False


def test_a_postgres_database_url_selects_postgresql_and_connects(tmp_path: Path) -> None:
    connect = postgres_reachable() or os.environ.get("CI") == "true"
    out = load({"OPSCONSOLE_DATA_DIR": str(tmp_path), "DATABASE_URL": PG_URL}, connect=connect)
    assert out["engine"] == "django.db.backends.postgresql"
    assert out["name"] == PG_URL.rsplit("/", 1)[1]
    if connect:
        assert out["select"] == 1


@pytest.mark.skipif(not postgres_reachable(), reason="needs the PostgreSQL server on 127.0.0.1")
@pytest.mark.parametrize(("env", "query", "threshold", "mode"), [
    ({}, "", 2, "force_generic_plan"),  # prepared after 2 executions, planned once
    ({"OPSCONSOLE_DB_PREPARE_THRESHOLD": "5"}, "", 5, "force_generic_plan"),
    ({"OPSCONSOLE_DB_PREPARE_THRESHOLD": "off"}, "", None, "auto"),  # a pooler: no prepared statements, no options
    ({}, "?options=-c%20plan_cache_mode%3Dforce_custom_plan", 2, "force_custom_plan"),  # the URL's own choice wins
])
def test_prepared_statements_are_planned_once_unless_turned_off(tmp_path: Path, env, query, threshold, mode) -> None:
    out = load({"OPSCONSOLE_DATA_DIR": str(tmp_path), "DATABASE_URL": PG_URL + query, **env}, connect=True)
    assert (out["prepare_threshold"], out["plan_cache_mode"]) == (threshold, mode)


def test_production_settings_require_a_secret_key(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="SECRET_KEY must be set"):
        load({"OPSCONSOLE_DATA_DIR": str(tmp_path), "DATABASE_URL": PG_URL}, module="opsconsole.settings_production")


def test_production_settings_turn_debug_off_and_hold_browsers_to_https(tmp_path: Path) -> None:
    out = load(
        {"OPSCONSOLE_DATA_DIR": str(tmp_path), "DATABASE_URL": PG_URL, "SECRET_KEY": "x" * 60, "DEBUG": "1"},
        module="opsconsole.settings_production",
    )
    assert out["debug"] is False
    assert out["hsts"] >= 31536000
    assert out["secure_cookie"] is True


def test_the_local_secret_key_is_generated_once_per_installation(tmp_path: Path) -> None:
    load({"OPSCONSOLE_DATA_DIR": str(tmp_path)})
    first = (tmp_path / "secret_key").read_text()
    load({"OPSCONSOLE_DATA_DIR": str(tmp_path)})
    assert (tmp_path / "secret_key").read_text() == first
    assert len(first) >= 50


def test_a_malformed_number_in_the_environment_stops_start_up_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as info:
        load({"OPSCONSOLE_DATA_DIR": str(tmp_path), "OPSCONSOLE_WORKQUEUE_QPS": "ten"})
    assert "ImproperlyConfigured: OPSCONSOLE_WORKQUEUE_QPS='ten' is not a number" in str(info.value)
    with pytest.raises(RuntimeError, match="OPSCONSOLE_API_BULK_MAX='1.5' is not an integer"):
        load({"OPSCONSOLE_DATA_DIR": str(tmp_path), "OPSCONSOLE_API_BULK_MAX": "1.5"})


def test_numbers_from_the_environment_keep_their_type(tmp_path: Path) -> None:
    probe = ("import django; from django.conf import settings; django.setup(); "
             "print(repr(settings.OPSCONSOLE_WORKQUEUE_QPS), repr(settings.OPSCONSOLE_API_BULK_MAX))")
    env = {**os.environ, "OPSCONSOLE_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "opsconsole.settings",
           "OPSCONSOLE_WORKQUEUE_QPS": " 25 ", "OPSCONSOLE_API_BULK_MAX": ""}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["25.0", "500"]


def test_the_kept_inputs_retention_comes_from_the_environment(tmp_path: Path) -> None:
    """OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS reaches what `manage.py retention` applies (default 14 days)."""
    probe = ("import django; django.setup(); from reconcilers.engine.capture_store import retention_days; "
             "print(repr(retention_days()))")
    env = {**os.environ, "OPSCONSOLE_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "opsconsole.settings"}
    env.pop("OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS", None)
    default = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                             check=True)
    assert default.stdout.split() == ["14.0"]
    env["OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS"] = "3.5"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3.5"]
    with pytest.raises(RuntimeError, match="OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS='two weeks' is not a number"):
        load({"OPSCONSOLE_DATA_DIR": str(tmp_path), "OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS": "two weeks"})
