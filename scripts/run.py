"""`make run`: the whole product on its embedded default, under one process manager (honcho).

It migrates the SQLite database, creates the demo administrator, finds or starts a Redis, starts the
sandbox cluster (kubesim) unless KUBECONFIG points at a real one, the controller, a Celery worker and
the web server, and prints the URL and login. Ctrl-C stops everything it started.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.redis_local import redis_answers, redis_command  # noqa: E402

EMBEDDED_REDIS_PORT = 6390
KUBESIM_PORT = int(os.environ.get("KUBESIM_PORT", "6443"))
WEB_ADDR = os.environ.get("OPSCONSOLE_ADDR", "127.0.0.1:8000")


def manage(*args: str, env: dict[str, str]) -> str:
    """Run a management command to completion and return what it printed."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def procfile_lines(env: dict[str, str], data_dir: Path, login: str) -> list[str]:
    """The processes honcho runs, one `name: command` line each."""
    py = shlex.quote(sys.executable)
    lines: list[str] = []
    if env.get("OPSCONSOLE_EMBEDDED_REDIS"):
        lines.append("redis: " + shlex.join(redis_command(EMBEDDED_REDIS_PORT, data_dir / "redis")))
    if env.get("OPSCONSOLE_KUBESIM") and (ROOT / "kubesim" / "__main__.py").exists():
        lines.append(
            f"kubesim: {py} -m kubesim --port {KUBESIM_PORT} --kubeconfig {shlex.quote(env['KUBECONFIG'])}"
            f" --data-dir {shlex.quote(str(data_dir / 'kubesim'))}"
        )
    if (ROOT / "reconcilers" / "management" / "commands" / "runcontroller.py").exists():
        lines.append(f"controller: {py} manage.py runcontroller --bootstrap --install-crds")
    lines.append(f"worker: {py} -m celery -A opsconsole worker -l INFO --concurrency 2 -n worker@%h")
    lines.append(
        f"web: {py} -m gunicorn opsconsole.wsgi -b {WEB_ADDR} --workers 2 --threads 4 --access-logfile -"
    )
    lines.append(f"announce: {py} scripts/announce.py http://{WEB_ADDR}/ {shlex.quote(login)}")
    return lines


def main() -> int:
    """Prepare the embedded default and hand over to honcho."""
    env = dict(os.environ)
    data_dir = Path(env.setdefault("OPSCONSOLE_DATA_DIR", str(ROOT / "data")))
    data_dir.mkdir(parents=True, exist_ok=True)
    env.setdefault("PYTHONUNBUFFERED", "1")

    if "REDIS_URL" not in env:
        if redis_answers("127.0.0.1", 6379):
            env["REDIS_URL"] = "redis://127.0.0.1:6379/0"
            print("redis: using the Redis on 127.0.0.1:6379")
        else:
            env["REDIS_URL"] = f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0"
            env["OPSCONSOLE_EMBEDDED_REDIS"] = "1"
            print(f"redis: none on 127.0.0.1:6379, starting an embedded one on port {EMBEDDED_REDIS_PORT}")
    if not env.get("KUBECONFIG"):
        env["KUBECONFIG"] = str(data_dir / "kubeconfig")
        env["OPSCONSOLE_KUBESIM"] = "1"
        print(f"cluster: starting the sandbox cluster (kubesim) on 127.0.0.1:{KUBESIM_PORT}")
    else:
        print(f"cluster: using KUBECONFIG={env['KUBECONFIG']}")

    print("database: migrating", env.get("DATABASE_URL", f"sqlite:///{data_dir / 'opsconsole.sqlite3'}"))
    manage("migrate", "--noinput", env=env)
    login = manage("demo_admin", env=env).strip()

    procfile = data_dir / "Procfile"
    procfile.write_text("\n".join(procfile_lines(env, data_dir, login)) + "\n")
    honcho = [sys.executable, "-m", "honcho", "-f", str(procfile), "-d", str(ROOT), "start"]
    os.chdir(ROOT)
    os.execvpe(honcho[0], honcho, env)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
