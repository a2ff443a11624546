"""The wheel a kind's own repository installs, used as a newcomer would, with no clone of opsconsole anywhere:
`python -m build` makes the sdist and the wheel (templates, static files, migrations, the scaffold's templates,
the `opsconsole` console script and the pytest plugin's entry point); the wheel goes into a fresh virtual
environment; `opsconsole startkind --project` scaffolds a repository there, whose own `ci.sh` installs it and
runs its tests (the plugin, kubesim, and the whole engine on SQLite, migrated from the wheel's migrations); the
console installed from the wheel serves its login page with its static files.

Offline, and honest about a fresh environment: it holds only the dependency closure of the wheel's own
`Requires-Dist` (no extra; tests/packaging/closure.py walks it through this repository's virtual environment and
links those distributions' files), plus pip, and later what the scaffolded project itself declares (its `test`
extra and its build requirements, read from its pyproject.toml). pip then finds them installed and resolves the
wheel's requirements with no index (`--no-index`); a runtime dependency the wheel forgot to declare is missing
there, as on a user's machine; nothing links back to this checkout. The build runs in a temporary copy of the
checkout's files, so no `build/`, `dist/` or `*.egg-info` is left in the checkout. A few minutes on a busy machine:
`slow`, run by `.ci/run` as a step of its own (`scripts/test.py tests/packaging -m slow`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.packaging.closure import closure, link_distributions, wheel_requirements

ROOT = Path(__file__).resolve().parents[2]
#: this repository's site-packages, where the fresh environment's dependencies are linked from
OURS = Path(sysconfig.get_paths()["purelib"])

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def clean_env(tmp: Path, venv: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: no checkout on PYTHONPATH, no settings module, a data folder of its own."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(OPSCONSOLE_DATA_DIR=str(tmp / "data"), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    if venv is not None:
        env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    return env


def checkout_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) copied to `target`: what the build reads,
    without the setuptools build folder and egg-info it writes landing in the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():  # a file deleted by someone's edit is still listed
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def link_closure(venv: Path, requirements: list[str]) -> list[str]:
    """Link the distributions `requirements` need (opsconsole aside) into the venv; the entries linked whole."""
    site = venv / OURS.relative_to(Path(sys.prefix))
    return link_distributions(closure(requirements, OURS, exclude=["opsconsole"]).values(), OURS, site)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built from a copy of this checkout (no build isolation: setuptools from this venv),
    into a temporary folder."""
    out, source = tmp_path_factory.mktemp("dist"), checkout_copy(tmp_path_factory.mktemp("source"))
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)], source,
        {**os.environ, "PIP_NO_INDEX": "1"})
    return out


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed by pip: only pip and the wheel's dependency closure
    (its `Requires-Dist` without extras) linked from this venv's site-packages."""
    tmp = tmp_path_factory.mktemp("fresh")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, clean_env(tmp))
    [wheel] = dist.glob("opsconsole-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [info] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requirements = wheel_requirements(archive.read(info).decode())
    assert "django==5.2.19" in requirements and not any(r.startswith("pytest") for r in requirements)
    linked = link_closure(venv, [*requirements, "pip"])
    assert "django" in linked and not {"pytest", "pytest_django", "playwright", "helm"} & set(linked)
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", str(wheel)], tmp, clean_env(tmp))
    return venv


def test_the_sdist_and_the_wheel_carry_the_console_the_migrations_and_the_entry_points(dist):
    [wheel] = dist.glob("opsconsole-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in ("opsconsole/templates/base.html", "opsconsole/templates/registration/login.html",
                     "opsconsole/static/favicon.svg", "reconcilers/migrations/0001_initial.py",
                     "opsconsole/accounts/migrations/0001_initial.py", "kubesim/README.md",
                     "reconcilers/authoring/scaffold/templates/kind.py.tmpl",
                     "reconcilers/authoring/scaffold/templates/project_ci.sh.tmpl"):
        assert expected in names, expected
    tracked = subprocess.run(["git", "ls-files", "templates", "static"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert len(tracked) > 30
    # every web asset of the checkout (one deleted meanwhile by someone's edit aside) is in the package
    assert [p for p in tracked if f"opsconsole/{p}" not in names and (ROOT / p).exists()] == []
    [info] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    entry_points = zipfile.ZipFile(wheel).read(info).decode()
    assert "opsconsole = opsconsole.__main__:main" in entry_points
    assert "opsconsole = opsconsole.testing.plugin" in entry_points
    [sdist] = dist.glob("opsconsole-*.tar.gz")
    members = tarfile.open(sdist).getnames()
    assert any(m.endswith("/templates/base.html") for m in members) and any(m.endswith("/setup.py") for m in members)
    assert any(m.endswith("/static/favicon.svg") for m in members)


def test_a_kind_in_its_own_repository_passes_its_ci_with_the_installed_wheel(venv, tmp_path):
    python = str(venv / "bin" / "python")
    env = clean_env(tmp_path, venv)
    where = run([python, "-c", "import opsconsole, sys; print(opsconsole.__file__); print(sys.path)"], tmp_path, env)
    assert where.startswith(str(venv)), where
    assert str(ROOT) not in where
    out = run([str(venv / "bin" / "opsconsole"), "startkind", "StaticSite", "--group", "web.example.com", "--owns",
               "apps/v1/Deployment,v1/Service", "--project", "staticsite-kind"], tmp_path, env)
    project = tmp_path / "staticsite-kind"
    assert "Created the StaticSite kind" in out and (project / "ci.sh").stat().st_mode & 0o111
    assert {p.name for p in project.iterdir()} == {"pyproject.toml", "README.md", "ci.sh", "Dockerfile", ".gitignore",
                                                   "staticsite"}
    assert "`opsconsole crds StaticSite`" in (project / "staticsite" / "kind.py").read_text()
    # what the project itself declares for its tests and its build, as its own pyproject.toml says (not a list here)
    meta = tomllib.loads((project / "pyproject.toml").read_text())
    declared = [*meta["project"]["optional-dependencies"]["test"], *meta["build-system"]["requires"]]
    assert any(r.startswith("pytest") for r in declared)
    link_closure(venv, declared)
    # the project's own CI: install it (editable, no build isolation: no index here) and run its tests
    ci = run([str(project / "ci.sh"), "-p", "no:cacheprovider"], project,
             {**env, "PIP_NO_BUILD_ISOLATION": "0"}, timeout=400)
    assert "4 passed" in ci, ci
    kinds = run([python, "-c", "from importlib.metadata import entry_points; "
                 "print([e.value for e in entry_points(group='opsconsole.kinds')])"], tmp_path, env)
    assert "staticsite.kind:StaticSiteReconciler" in kinds
    crd = run([str(venv / "bin" / "opsconsole"), "crds", "StaticSite"], tmp_path, env)
    assert "name: staticsites.web.example.com" in crd


def test_the_console_installed_from_the_wheel_serves_its_pages_and_static_files(venv, tmp_path):
    env = {**clean_env(tmp_path, venv), "STATIC_ROOT": str(tmp_path / "static")}
    opsconsole = str(venv / "bin" / "opsconsole")
    run([opsconsole, "migrate", "--noinput", "-v", "0"], tmp_path, env)
    # no deploy/ beside an installed wheel: --bootstrap says what to pass instead of applying nothing
    bootstrap = subprocess.run([opsconsole, "runcontroller", "--bootstrap", "--api-timeout", "1"], cwd=tmp_path,
                               env=env, capture_output=True, text=True, timeout=120)
    assert bootstrap.returncode != 0 and "pass --crds DIR --samples DIR" in bootstrap.stderr, bootstrap.stderr
    run([opsconsole, "collectstatic", "--noinput", "-v", "0"], tmp_path, env)
    assert (tmp_path / "static" / "favicon.svg").is_file()
    page = run([str(venv / "bin" / "python"), "-c", """
import django, os
os.environ["DJANGO_SETTINGS_MODULE"] = "opsconsole.settings"
django.setup()
from django.conf import settings
from django.test import Client
response = Client().get("/login/", HTTP_HOST="localhost")
print(response.status_code, settings.TEMPLATES[0]["DIRS"][0])
print(response.content.decode())
"""], tmp_path, env)
    status, templates = page.splitlines()[0].split(" ", 1)
    assert status == "200" and templates.startswith(str(venv)), page[:300]
    assert 'name="password"' in page
