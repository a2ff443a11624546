"""The files a new user and CI rely on: the README's two commands, .ci/run, and docker-compose.yml."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def test_the_readme_opens_with_exactly_two_commands_that_exist_in_the_makefile() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```(?:\w+)?\n(.*?)```", readme, re.S)
    assert first_block is not None
    commands = [line for line in first_block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert commands == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_ci_runs_the_readmes_test_command_on_postgresql() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    assert "DATABASE_URL=postgres" in ci
    assert "set -euo pipefail" in ci


def compose_config() -> dict:
    env = dict(os.environ, SECRET_KEY="compose-check", GRAFANA_ADMIN_PASSWORD="compose-check")
    proc = subprocess.run(
        [str(BIN / "docker-compose"), "-f", "docker-compose.yml", "config", "--format", "json"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_docker_compose_validates_and_has_the_services_it_promises() -> None:
    services = compose_config()["services"]
    assert {"web", "worker", "controller", "redis", "postgres"} <= set(services)
    assert "--appendonly" in services["redis"]["command"]
    for name in ("web", "worker", "redis", "postgres"):
        assert services[name].get("healthcheck"), name


def test_every_compose_service_command_exists_in_the_project() -> None:
    services = compose_config()["services"]
    from django.core.management import get_commands

    commands = get_commands()
    for name, service in services.items():
        if "build" not in service:
            continue
        argv = service["command"] if isinstance(service["command"], list) else shlex.split(service["command"])
        if argv[:2] == ["python", "manage.py"]:
            assert argv[2] in commands, f"{name}: manage.py {argv[2]} does not exist"
        elif argv[0] == "gunicorn":
            module, _, attr = argv[1].partition(":")
            assert (ROOT / (module.replace(".", "/") + ".py")).exists(), name
        elif argv[0] == "celery":
            assert argv[1:3] == ["-A", "opsconsole"], name
            assert (ROOT / "opsconsole" / "celery.py").exists()
        else:
            raise AssertionError(f"{name}: unknown command {argv}")
