"""The startkind scaffold's templates (reconcilers/authoring/scaffold/templates/) as the files they are: each one is
package data and used, and what they render for every kind of child passes the project's ruff rules and mypy as
written into a package."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

from reconcilers.authoring import scaffold
from reconcilers.authoring.scaffold import project, rendering, stateful

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "reconcilers.authoring.scaffold"
#: kind → (options of plan): between them every template and every kind of child
CASES = {
    "Website": {"owns": "apps/v1/Deployment,v1/Service"},
    "Gizmo": {"version": "v2beta3"},
    "Realm": {"cluster_scoped": True, "owns": "v1/Namespace"},
    "Store": {"owns": "apps/v1/StatefulSet,v1/Service,v1/ConfigMap,v1/Secret,v1/ServiceAccount"},
    "Fleet": {"owns": "apps/v1/Deployment,apps/v1/StatefulSet"},
    "Widget": {"owns": "example.com/v1/Gadget,batch/v1/Job,v1/ConfigMap"},
}


def template_files() -> set[str]:
    return {p.name for p in files(PACKAGE).joinpath("templates").iterdir() if p.name.endswith(".tmpl")}


def test_every_template_is_package_data_and_used():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][PACKAGE]
    names = template_files()
    assert names and all(any(fnmatch.fnmatch(f"templates/{n}", pattern) for pattern in data) for n in names)
    used = {f"{n}.py.tmpl" for n in re.findall(r'template\("(\w+)"\)', Path(rendering.__file__).read_text())}
    # the ordered StatefulSet kind's parts (its module calls the renderer's lookup `template` or `t`)
    used |= {f"{n}.py.tmpl" for n in re.findall(r'\b(?:template|t)\("(\w+)"\)', Path(stateful.__file__).read_text())}
    used |= {f"project_{n}.tmpl" for n in project.PROJECT_FILES.values()}  # startkind --project's files
    assert used == names


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Every case planned and written, each into a package of its own: kind → (directory, package)."""
    out = {}
    for kind, options in CASES.items():
        base = tmp_path_factory.mktemp(kind.lower())
        plan = scaffold.plan(kind, "example.com", package_dir=str(base / kind.lower()), **options)
        scaffold.write(plan)
        out[kind] = (base, plan.package)
    return out


@pytest.mark.parametrize("kind", CASES)
def test_the_rendered_package_passes_ruff(written, kind):
    base, package = written[kind]
    first_party = f"lint.isort.known-first-party=['reconcilers', 'opsconsole', 'kubesim', '{package}']"
    proc = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                           "--config", first_party, str(base / package)], capture_output=True, text=True, cwd=base)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rendered_kinds_type_check(written):
    """mypy on every rendered kind module at once (what the kind's own code says about its types; the imports
    of the product are taken as they are, not checked again here)."""
    modules = [str(base / package / "kind.py") for base, package in written.values()]
    proc = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-incremental",
                           "--follow-imports=skip", "--check-untyped-defs", *modules],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
