"""`make run`: the whole product on its embedded default, under one process manager (honcho).

It migrates the SQLite database, creates the demo administrator, finds or starts a Redis, starts the
sandbox cluster (kubesim) unless KUBECONFIG points at a real one, the controller, a Celery worker and
the web server, and prints the URL and login. Ctrl-C stops everything it started, in order: the controller,
worker, web server and announcer first; the cluster (kubesim) and the embedded Redis only once those have exited
(or after `STOP_GRACE` seconds), so the controller can still release its leader Lease on the cluster and the
next `make run` reconciles at once instead of waiting for a stale Lease to expire.

The sandbox is two clusters (docs/operations.md, "Many clusters"): kubesim (the `default` cluster, every sample of
deploy/samples) and a second kubesim, `sandbox-2` on the next port (SANDBOX_SAMPLES of them), its kubeconfig
(`<data dir>/kubeconfig-sandbox-2`, context `sandbox-2`) listed after the first in KUBECONFIG, its own controller
(`runcontroller --cluster sandbox-2 --context sandbox-2`); the workers and the console serve both.

The sandbox's webhooks are mutual TLS at both ends, as in a cluster: before kubesim starts, the webhook server's
client CA and kubesim's client certificate are made in `<data dir>/webhooks` (kept across runs); kubesim presents
the certificate (`--webhook-client-cert/-key`), `runwebhooks --install` trusts only that CA. Its metrics and health
are plain HTTP on `OPSCONSOLE_WEBHOOKS_METRICS_PORT` (9444).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.redis_local import redis_answers, redis_command  # noqa: E402

EMBEDDED_REDIS_PORT = 6390
KUBESIM_PORT = int(os.environ.get("KUBESIM_PORT", "6443"))
#: the sandbox's second cluster: its name (and kubeconfig context), its kubesim's port, the samples it gets
SANDBOX_2 = "sandbox-2"
SANDBOX_2_PORT = int(os.environ.get("KUBESIM_2_PORT", str(KUBESIM_PORT + 1)))
SANDBOX_SAMPLES = ("memcached.yaml", "tenant.yaml")
WEB_ADDR = os.environ.get("OPSCONSOLE_ADDR", "127.0.0.1:8000")
WEBHOOKS_PORT = int(os.environ.get("OPSCONSOLE_WEBHOOKS_PORT", "9443"))
WEBHOOKS_METRICS_PORT = int(os.environ.get("OPSCONSOLE_WEBHOOKS_METRICS_PORT", "9444"))
#: the processes stopped last, once every other one has exited: what the others still talk to while they stop
STOP_LAST = ("kubesim", "kubesim-2", "redis")
#: the longest wait for the first processes to exit before the last ones are stopped anyway
STOP_GRACE = 10.0


def manage(*args: str, env: dict[str, str]) -> str:
    """Run a management command to completion and return what it printed."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def webhook_client_files(data_dir: Path) -> tuple[Path, Path]:
    """kubesim's client certificate and key for the webhook servers (made with the servers' client CA when
    missing, with their serving certificate, in the directory `runwebhooks` makes and reads its certificates in)."""
    from opsconsole.webhooks.tls import ensure_certificates, ensure_client_certificates

    ensure_certificates(data_dir / "webhooks")  # the serving ones too: made here, not by two servers at once
    files = ensure_client_certificates(data_dir / "webhooks")
    return files.cert, files.key


def worker_concurrency(cores: int | None = None) -> int:
    """Worker processes for the sandbox: two per core (a reconcile waits on the API and the database much of
    its time: on 2 cores 4 processes converge ~1.3x as fast as 2), at least 2 and at most 4 (each is ~140 MB)."""
    cores = cores or os.cpu_count() or 1
    return max(2, min(4, 2 * cores))


#: the start of Celery's warning when its worker runs as root (celery.platforms.ROOT_DISCOURAGED)
ROOT_WARNING = "You're running the worker with superuser privileges"


def root_warning_filter(euid: int | None = None) -> str:
    """` -W ignore:<ROOT_WARNING>` when the sandbox runs as root (a container, a CI job), else nothing.

    Celery warns at every start of a worker run as root; the sandbox runs everything as whoever typed `make run`,
    and `main` says once that it is root (a deployment runs the worker as a non-root user: deploy/). Only that one
    warning is filtered (by its text), none of the others."""
    euid = os.geteuid() if euid is None else euid
    return " -W " + shlex.quote(f"ignore:{ROOT_WARNING}") if euid == 0 else ""


def procfile_lines(env: dict[str, str], data_dir: Path, login: str) -> list[str]:
    """The processes honcho runs, one `name: command` line each."""
    py = shlex.quote(sys.executable)
    lines: list[str] = []
    if env.get("OPSCONSOLE_EMBEDDED_REDIS"):
        lines.append("redis: " + shlex.join(redis_command(EMBEDDED_REDIS_PORT, data_dir / "redis")))
    if env.get("OPSCONSOLE_KUBESIM") and (ROOT / "kubesim" / "__main__.py").exists():
        client = data_dir / "webhooks"  # the webhook server's client certificate (webhook_client_files)
        lines.append(
            f"kubesim: {py} -m kubesim --port {KUBESIM_PORT} --kubeconfig {shlex.quote(first_kubeconfig(env))}"
            f" --data-dir {shlex.quote(str(data_dir / 'kubesim'))}"
            f" --webhook-client-cert {shlex.quote(str(client / 'webhook-client.pem'))}"
            f" --webhook-client-key {shlex.quote(str(client / 'webhook-client-key.pem'))}"
        )
    if env.get("OPSCONSOLE_KUBESIM") and (ROOT / "kubesim" / "__main__.py").exists():
        client = data_dir / "webhooks"  # the same client certificate: both webhook servers trust its CA
        lines.append(
            f"kubesim-2: {py} -m kubesim --port {SANDBOX_2_PORT} --context {SANDBOX_2}"
            f" --kubeconfig {shlex.quote(str(sandbox_kubeconfig(data_dir)))}"
            f" --data-dir {shlex.quote(str(data_dir / f'kubesim-{SANDBOX_2}'))}"
            f" --webhook-client-cert {shlex.quote(str(client / 'webhook-client.pem'))}"
            f" --webhook-client-key {shlex.quote(str(client / 'webhook-client-key.pem'))}"
        )
    if (ROOT / "reconcilers" / "management" / "commands" / "runcontroller.py").exists():
        lines.append(f"controller: {py} manage.py runcontroller --bootstrap --install-crds")
        if env.get("OPSCONSOLE_KUBESIM"):  # the second sandbox cluster's own controller (its own metrics port)
            lines.append(f"controller-2: OPSCONSOLE_CONTROLLER_METRICS_PORT=9103 {py} manage.py runcontroller "
                         f"--cluster {SANDBOX_2} --context {SANDBOX_2} --bootstrap --install-crds "
                         f"--samples {shlex.quote(str(data_dir / f'samples-{SANDBOX_2}'))}")
    lines.append(f"worker: {py}{root_warning_filter()} -m celery -A opsconsole worker -l INFO "
                 f"--concurrency {worker_concurrency()} -n worker@%h")
    lines.append(
        f"web: {py} -m gunicorn opsconsole.wsgi -b {WEB_ADDR} --workers 2 --threads 4 --access-logfile -"
    )
    lines.append(f"announce: {py} scripts/announce.py http://{WEB_ADDR}/ {shlex.quote(login)}")
    if env.get("OPSCONSOLE_KUBESIM") and (ROOT / "reconcilers" / "management" / "commands" / "runwebhooks.py").exists():
        # the admission webhooks, installed into the sandbox once they listen (failurePolicy Ignore there)
        lines.append(f"webhooks: {py} manage.py runwebhooks --port {WEBHOOKS_PORT} --metrics-port "
                     f"{WEBHOOKS_METRICS_PORT} --install")
        # the second cluster's own (its CRDs' conversion webhook too: a multi-version kind is listed through it)
        lines.append(f"webhooks-2: KUBECONFIG={shlex.quote(str(sandbox_kubeconfig(data_dir)))} {py} manage.py "
                     f"runwebhooks --cluster {SANDBOX_2} --port {WEBHOOKS_PORT + 2} --metrics-port "
                     f"{WEBHOOKS_METRICS_PORT + 2} --install")
    if env.get("OPSCONSOLE_KUBESIM") and env.get("OPSCONSOLE_DEMO_ROLLBACK", "1") != "0":
        # the self-healing demo (docs/healing.md); its object is in the default cluster: that kubeconfig alone
        lines.append(f"demo: KUBECONFIG={shlex.quote(first_kubeconfig(env))} {py} scripts/demo_rollback.py")
    return lines


def first_kubeconfig(env: dict[str, str]) -> str:
    """The first file of KUBECONFIG (the default cluster's: kubesim writes it)."""
    return env["KUBECONFIG"].split(os.pathsep)[0]


def sandbox_kubeconfig(data_dir: Path) -> Path:
    """The kubeconfig the second sandbox cluster's kubesim writes (context SANDBOX_2)."""
    return data_dir / f"kubeconfig-{SANDBOX_2}"


def sandbox_samples(data_dir: Path) -> Path:
    """The folder of the samples the second sandbox cluster's controller applies (SANDBOX_SAMPLES), refreshed."""
    folder = data_dir / f"samples-{SANDBOX_2}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in SANDBOX_SAMPLES:
        shutil.copyfile(ROOT / "deploy" / "samples" / name, folder / name)
    return folder


def group_alive(pid: int) -> bool:
    """Whether any process of the process group `pid` (a honcho child leads its own) is still there."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_in_order(pids: dict[str, int], signal_group: Callable[[str, int], None],
                  alive: Callable[[int], bool] = group_alive, *, last: tuple[str, ...] = STOP_LAST,
                  grace: float = STOP_GRACE, clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """SIGTERM every process group of `pids` (name → pid) but the `last` ones, wait until they have exited (at
    most `grace` seconds), then SIGTERM the `last` ones. `signal_group(name, pid)` sends the signal. Returns the
    names in the order they were signalled."""
    first = [name for name in pids if name not in last]
    then = [name for name in pids if name in last]
    for name in first:
        signal_group(name, pids[name])
    deadline = clock() + grace
    while any(alive(pids[name]) for name in first) and clock() < deadline:
        sleep(0.05)
    for name in then:
        signal_group(name, pids[name])
    return first + then


def ordered_manager() -> type:
    """honcho's Manager, stopping its processes in order (`stop_in_order`) instead of all at once."""
    from honcho.manager import Manager

    class OrderedManager(Manager):
        forced = False  # whether a process had to be SIGKILLed (it did not stop on SIGTERM)

        def _killall(self, force: bool = False) -> None:
            if force:  # honcho's KILL_WAIT passed: SIGKILL whatever is left, as honcho does
                self.forced = True
                super()._killall(force=True)
                return
            pids = {name: p["pid"] for name, p in self._processes.items()
                    if "returncode" not in p and p.get("pid") is not None}

            def term(name: str, pid: int) -> None:
                self._system_print(f"sending SIGTERM to {name} (pid {pid})\n")
                self._procmgr.terminate(pid)

            stop_in_order(pids, term)

    return OrderedManager


def exit_status(returncode: int | None, forced: bool) -> int:
    """`make run`'s exit status: 0 after a clean Ctrl-C or SIGTERM (honcho reports 130 or 143 for the signal
    itself, which made make print `Error 130` after every ordinary stop), honcho's status otherwise (a process
    that exited on its own first, or a stop that needed SIGKILL: 1 if honcho had none)."""
    if returncode in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        return 1 if forced else 0
    return returncode or 0


def run_procfile(lines: list[str], env: dict[str, str]) -> int:
    """Run the `name: command` lines under honcho (output multiplexed, as `honcho start` does), stopped in order."""
    from honcho.printer import Printer

    manager = ordered_manager()(Printer(sys.stdout, colour=sys.stdout.isatty(), prefix=True))
    for line in lines:
        name, _, command = line.partition(":")
        manager.add_process(name.strip(), command.strip(), env=env, cwd=str(ROOT))
    manager.loop()
    return exit_status(manager.returncode, manager.forced)


def main() -> int:
    """Prepare the embedded default and hand over to honcho."""
    env = dict(os.environ)
    data_dir = Path(env.setdefault("OPSCONSOLE_DATA_DIR", str(ROOT / "data")))
    data_dir.mkdir(parents=True, exist_ok=True)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # the sandbox is for looking: every reconcile traced (a deployment samples 10 %: OPSCONSOLE_TRACE_SAMPLE_RATIO)
    env.setdefault("OPSCONSOLE_TRACE_SAMPLE_RATIO", "1")

    if "REDIS_URL" not in env:
        if redis_answers("127.0.0.1", 6379):
            env["REDIS_URL"] = "redis://127.0.0.1:6379/0"
            print("redis: using the Redis on 127.0.0.1:6379")
        else:
            env["REDIS_URL"] = f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0"
            env["OPSCONSOLE_EMBEDDED_REDIS"] = "1"
            print(f"redis: none on 127.0.0.1:6379, starting an embedded one on port {EMBEDDED_REDIS_PORT}")
    if not env.get("KUBECONFIG"):
        # the default cluster's kubeconfig first: its current context is the processes' own (as kubectl's)
        env["KUBECONFIG"] = os.pathsep.join([str(data_dir / "kubeconfig"), str(sandbox_kubeconfig(data_dir))])
        env["OPSCONSOLE_KUBESIM"] = "1"
        sandbox_samples(data_dir)
        print(f"cluster: starting the sandbox clusters (kubesim): default on 127.0.0.1:{KUBESIM_PORT}, "
              f"{SANDBOX_2} on 127.0.0.1:{SANDBOX_2_PORT}")
        cert, _ = webhook_client_files(data_dir)
        print(f"webhooks: mutual TLS, kubesim presents {cert}")
    else:
        print(f"cluster: using KUBECONFIG={env['KUBECONFIG']}")

    if os.geteuid() == 0:
        print("worker: running as root (fine for the sandbox; a deployment runs it as a non-root user), "
              "Celery's warning about it is left out")
    print("database: migrating", env.get("DATABASE_URL", f"sqlite:///{data_dir / 'opsconsole.sqlite3'}"))
    manage("migrate", "--noinput", env=env)
    login = manage("demo_admin", env=env).strip()

    lines = procfile_lines(env, data_dir, login)
    (data_dir / "Procfile").write_text("\n".join(lines) + "\n")  # for `honcho -f data/Procfile start` by hand
    os.chdir(ROOT)
    return run_procfile(lines, env)


if __name__ == "__main__":
    raise SystemExit(main())
