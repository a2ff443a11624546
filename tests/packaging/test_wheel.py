"""The wheel a kind's own repository installs, used as a newcomer would, with no clone of opsconsole anywhere:
`python -m build` makes the sdist and the wheel (templates, static files, migrations, the scaffold's templates,
the `opsconsole` console script and the pytest plugin's entry point); the wheel goes into a fresh virtual
environment; `opsconsole startkind --project` scaffolds a repository there, whose own `ci.sh` installs it and
runs its tests (the plugin, kubesim, and the whole engine on SQLite, migrated from the wheel's migrations); the
console installed from the wheel serves its login page with its static files.

Offline and fast: the fresh environment's dependencies are links to the entries of this repository's virtual
environment (every one but opsconsole's own), so pip finds them installed and resolves the wheel's requirements
against them with no index (`--no-index`); nothing links back to this checkout. About a minute: `slow`, run by
`.ci/run` as a step of its own (`scripts/test.py tests/packaging -m slow`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: entries of this repository's site-packages that are opsconsole itself (the editable install of the checkout)
OWN = ("opsconsole-", "__editable__", "__pycache__")

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


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built from this checkout (no build isolation: setuptools from this venv)."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)], ROOT,
        {**os.environ, "PIP_NO_INDEX": "1"})
    return out


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed by pip, its dependencies linked from this venv's."""
    tmp = tmp_path_factory.mktemp("fresh")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, clean_env(tmp))
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = venv / ours.relative_to(Path(sys.prefix))
    for entry in ours.iterdir():
        pth_of_ours = entry.suffix == ".pth" and str(ROOT) in entry.read_text(errors="replace")
        if not entry.name.startswith(OWN) and not pth_of_ours and not (theirs / entry.name).exists():
            (theirs / entry.name).symlink_to(entry)
    [wheel] = dist.glob("opsconsole-*.whl")
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
