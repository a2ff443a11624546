"""The wheel test's fresh environment holds only what is declared (tests/packaging/closure.py): the closure of
opsconsole's runtime requirements leaves its dev tools out, extras are followed, and a package whose requirement is
not linked fails to import there even though this repository's environment has it."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from tests.packaging.closure import NotInstalled, closure, link_distributions, wheel_requirements

SITE = Path(sysconfig.get_paths()["purelib"])
ROOT = Path(__file__).resolve().parents[2]


def fresh(tmp_path: Path) -> tuple[Path, Path]:
    """An empty virtual environment: its python and its site-packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python", venv / SITE.relative_to(Path(sys.prefix))


def imports(python: Path, module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True)


def test_a_wheels_runtime_requirements_are_those_without_an_extra():
    text = ("Metadata-Version: 2.4\nName: x\nRequires-Dist: django==5.2.19\nRequires-Dist: celery[redis]==5.7.0\n"
            'Requires-Dist: tomli; python_version < "3.0"\nRequires-Dist: pytest==9.2.0; extra == "dev"\n\n')
    assert wheel_requirements(text) == ["django==5.2.19", "celery[redis]==5.7.0"]


def test_the_runtime_closure_leaves_the_dev_tools_out():
    runtime = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = set(closure(runtime, SITE, exclude=["opsconsole"]))
    assert {"django", "asgiref", "sqlparse", "kombu", "pydantic-core", "jsonpointer"} <= names
    dev = {"pytest", "pytest-django", "playwright", "helm-python-sdk", "kopf", "schemathesis", "ruff", "mypy", "build"}
    assert not names & dev and "opsconsole" not in names


def test_extras_are_followed_and_a_missing_requirement_is_named():
    assert "redis" not in closure(["celery"], SITE) and "redis" in closure(["celery[redis]"], SITE)
    with pytest.raises(NotInstalled, match=r"no-such-dist.*needed by the wheel"):
        closure(["no-such-dist==1.0"], SITE)


def test_only_the_closure_imports_in_the_fresh_environment(tmp_path):
    python, site = fresh(tmp_path)
    linked = link_distributions(closure(["jsonpatch", "opentelemetry-api"], SITE).values(), SITE, site)
    assert "jsonpatch.py" in linked and "jsonpointer.py" in linked and "opentelemetry" not in linked
    assert imports(python, "jsonpatch").returncode == 0
    assert imports(python, "opentelemetry.trace").returncode == 0
    # installed here, not declared: absent there (yaml), nor the rest of a shared namespace package (the SDK)
    for undeclared in ("yaml", "opentelemetry.sdk", "django"):
        assert "ModuleNotFoundError" in imports(python, undeclared).stderr, undeclared


def test_a_requirement_dropped_from_the_closure_fails_the_import(tmp_path):
    python, site = fresh(tmp_path)
    everything = closure(["jsonpatch"], SITE)
    link_distributions([d for name, d in everything.items() if name != "jsonpointer"], SITE, site)
    failed = imports(python, "jsonpatch")
    assert failed.returncode != 0 and "No module named 'jsonpointer'" in failed.stderr
