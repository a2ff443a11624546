"""Production settings: `check --deploy` is clean, collectstatic works with whitenoise's manifest storage, logs
are JSON with trace ids and redacted, probes and scrapes are not redirected to HTTPS."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# what the test run's own environment may carry that a deployment never has (the browser tests set the last)
_TEST_ONLY_ENV = {"DEBUG", "LOG_FORMAT", "STATIC_ROOT", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE"}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _TEST_ONLY_ENV}
    env.update({
        "DJANGO_SETTINGS_MODULE": "opsconsole.settings_production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'prod.sqlite3'}",
        "OPSCONSOLE_DATA_DIR": str(tmp_path / "data"),
        "STATIC_ROOT": str(tmp_path / "static"),
    })
    env.update(extra)
    return env


def _manage(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=_env(tmp_path, **extra),
                          capture_output=True, text=True, timeout=120)


def test_check_deploy_is_clean_with_the_production_settings(tmp_path: Path) -> None:
    proc = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


def test_check_deploy_fails_on_a_weak_secret_key(tmp_path: Path) -> None:
    proc = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", SECRET_KEY="short")
    assert proc.returncode != 0 and "security.W009" in proc.stderr


def test_collectstatic_writes_a_manifest_and_compressed_files(tmp_path: Path) -> None:
    proc = _manage(tmp_path, "collectstatic", "--noinput")
    assert proc.returncode == 0, proc.stderr
    static = tmp_path / "static"
    manifest = json.loads((static / "staticfiles.json").read_text())
    assert manifest["paths"], "no static files hashed"
    name, hashed = next(iter(manifest["paths"].items()))
    assert (static / hashed).exists() and hashed != name
    assert list(static.rglob("*.gz")), "whitenoise wrote no compressed copies"


PROBE = """
import django, logging
django.setup()
from opentelemetry.sdk.trace import TracerProvider
from django.test import Client
tracer = TracerProvider().get_tracer("probe")
with tracer.start_as_current_span("probe") as span:
    logging.getLogger("opsconsole.probe").warning("calling with Authorization: Bearer oc_abcdefSECRETSECRETSECRET")
    print("TRACE", format(span.get_span_context().trace_id, "032x"), flush=True)
c = Client()
print("STATUS", c.get("/healthz").status_code, c.get("/readyz").status_code, c.get("/login/").status_code, flush=True)
"""


def test_production_logs_are_json_with_the_trace_id_and_probes_are_not_redirected(tmp_path: Path) -> None:
    env = _env(tmp_path, ALLOWED_HOSTS="testserver", REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/11"))
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("TRACE", "STATUS")))
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    (probe,) = [line for line in lines if line["logger"] == "opsconsole.probe"]
    assert probe["trace_id"] == out["TRACE"]
    assert "SECRET" not in proc.stderr and "Bearer [REDACTED]" in probe["message"]
    healthz, readyz, login = out["STATUS"].split()
    assert healthz == "200" and readyz in ("200", "503")  # answered, not redirected
    assert login == "301"  # everything else is held to HTTPS
