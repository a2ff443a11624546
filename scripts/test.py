"""`make test`: run the whole suite with what it needs (a Redis; kubesim and workers start in fixtures).

Uses the Redis on 127.0.0.1:6379 when it answers (database 15, so a running product on database 0 is
untouched), else starts an embedded Redis for the run and stops it afterwards. DATABASE_URL, when set,
points the suite at PostgreSQL; otherwise it runs on SQLite. Arguments are passed to pytest.

A run of the whole suite (no test path among the arguments) measures line coverage of the project's packages
(coverage.py through pytest-cov, configured in pyproject.toml) and reports it at the end; a run of chosen tests
does not unless asked (`--cov`), and `--no-cov` turns it off.

A run of the whole suite also runs on several processes (pytest-xdist; OPSCONSOLE_TEST_PROCESSES, default
DEFAULT_PROCESSES): most of the suite waits on engines, kubesim and the databases rather than computing, so two
cores carry more than two processes. Each process has its own Redis database, data folder, test database and
kubesim (tests/fixtures/parallel.py). `-n 0` runs it on one process; naming tests runs them on one unless `-n`
is given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.redis_local import redis_answers, start_embedded_redis  # noqa: E402

EMBEDDED_REDIS_PORT = 6391
DEFAULT_PROCESSES = 4
#: system programs the suite drives for real (Debian package → what must exist): the browser tests' Chromium
#: and the observability tests' Prometheus; pip cannot provide them
SYSTEM_PACKAGES = {"chromium": "/usr/bin/chromium", "prometheus": "/usr/bin/prometheus"}


def system_packages_ensure() -> None:
    """Install the missing system programs with apt-get when we are root; otherwise say how, and stop."""
    missing = [pkg for pkg, path in SYSTEM_PACKAGES.items() if not Path(path).exists()]
    if not missing:
        return
    command = ["apt-get", "install", "-y", "-q", *missing]
    if os.geteuid() != 0 or not Path("/usr/bin/apt-get").exists():
        raise SystemExit(f"the suite needs {', '.join(missing)}: run `sudo {' '.join(command)}` and try again")
    print(f"installing {', '.join(missing)} (Debian packages the suite needs)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(command, check=True, env=env)


def coverage_arguments(argv: list[str]) -> list[str]:
    """pytest-cov's arguments for a run of the whole suite: measure, and end with the report (the total line
    included); none when the arguments name tests (a path, `path::test`) or already say what to do about
    coverage."""
    if any(arg == "--no-cov" or arg.startswith("--cov") for arg in argv):
        return []
    if names_tests(argv):
        return []
    return ["--cov", "--cov-report=term:skip-covered"]


def names_tests(argv: list[str]) -> bool:
    """Whether the arguments name tests (a path, `path::test`) rather than meaning the whole suite."""
    return any(not arg.startswith("-") and (ROOT / arg.split("::")[0]).exists() for arg in argv)


def parallel_arguments(argv: list[str], environ: dict[str, str]) -> list[str]:
    """pytest-xdist's arguments: the suite's plugin for it (always, so that `-n` given by hand works too) and, for
    a run of the whole suite that does not say `-n` itself, OPSCONSOLE_TEST_PROCESSES processes (0 or 1: none)
    with the units of work tests/fixtures/parallel.py defines."""
    if "no:xdist" in argv:
        return []
    plugin = ["-p", "tests.fixtures.parallel", "--dist", "loadgroup", "--no-loadscope-reorder"]
    processes = int(environ.get("OPSCONSOLE_TEST_PROCESSES", DEFAULT_PROCESSES))
    if any(arg.startswith(("-n", "--numprocesses")) for arg in argv) or names_tests(argv) or processes <= 1:
        return plugin
    return [*plugin, "-n", str(processes)]


def main(argv: list[str]) -> int:
    """Run pytest; its exit status is ours (no tests collected counts as a failure)."""
    system_packages_ensure()
    env = dict(os.environ)
    data_dir = Path(env.setdefault("OPSCONSOLE_DATA_DIR", str(ROOT / "data" / "test")))
    data_dir.mkdir(parents=True, exist_ok=True)
    # The engines the tests start must not write periodic audit checkpoints into the shared data dir: a test's
    # database is emptied after it, and audit_verify would then hold it against a checkpoint of rows now gone.
    # The checkpoint tests set their own interval and directory.
    env.setdefault("OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS", "0")
    # Every reconcile traced (the trace tests look for a run's spans); the sampling tests set their own ratio.
    env.setdefault("OPSCONSOLE_TRACE_SAMPLE_RATIO", "1")
    redis_proc = None
    if "REDIS_URL" not in env:
        if redis_answers("127.0.0.1", 6379):
            env["REDIS_URL"] = "redis://127.0.0.1:6379/15"
        else:
            print(f"no Redis on 127.0.0.1:6379: starting an embedded one on port {EMBEDDED_REDIS_PORT}")
            redis_proc = start_embedded_redis(EMBEDDED_REDIS_PORT, data_dir / "redis")
            env["REDIS_URL"] = f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/15"
    print(f"tests: REDIS_URL={env['REDIS_URL']} DATABASE_URL={env.get('DATABASE_URL', '(SQLite)')}", flush=True)
    try:
        rc = subprocess.call([sys.executable, "-m", "pytest", *parallel_arguments(argv, env),
                                *coverage_arguments(argv), *argv], cwd=ROOT, env=env)
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)
    return 1 if rc == 5 else rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
