"""A management command prints what it is for and nothing else: django-axes' start-up banner ("AXES: BEGIN
version …", logged by every process that loads the app when AXES_VERBOSE is on) is off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_management_command_does_not_print_the_axes_banner():
    out = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "LOG_LEVEL": "INFO"}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "System check identified no issues" in out.stdout
    assert "AXES" not in out.stdout + out.stderr, out.stderr
