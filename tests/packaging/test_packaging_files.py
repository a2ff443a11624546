"""The packaging's own files, checked fast (the wheel itself is built and installed by test_wheel.py, which is
slow): CI runs the wheel test as a step of its own, the sdist takes the web assets that the wheel's build copies
into the package, and the `opsconsole` command (`python -m opsconsole`) runs the management commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_slow_wheel_test_as_a_step_of_its_own():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.py tests/packaging -m slow" in ci
    assert ci.index("make test") < ci.index("tests/packaging -m slow")


def test_the_sdist_takes_the_web_assets_the_wheel_build_copies_into_the_package():
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert "graft templates" in manifest and "graft static" in manifest
    setup = (ROOT / "setup.py").read_text()
    assert '"templates": "opsconsole/templates"' in setup and '"static": "opsconsole/static"' in setup
    assert not (ROOT / "opsconsole" / "templates").exists()  # a checkout serves them from the top


def test_python_m_opsconsole_runs_the_management_commands(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["OPSCONSOLE_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run([sys.executable, "-m", "opsconsole", "help", "startkind"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: opsconsole startkind")
    assert "--project DIR" in done.stdout
