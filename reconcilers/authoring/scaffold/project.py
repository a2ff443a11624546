"""`startkind --project DIR`: the kind as a repository of its own, which depends on the opsconsole distribution.

Around the kind's package (`rendering.render`, under `DIR/<package>/`) it writes `pyproject.toml` (the
distribution, named after DIR, with the `opsconsole.kinds` entry point and a `test` extra), `README.md`, `ci.sh`
(install into a virtual environment, run the tests), a `Dockerfile` (the opsconsole image with the kind
installed) and a `.gitignore`, each from a `templates/project_*.tmpl` file. Nothing here needs a clone of
opsconsole: the distribution's version is read from the installed metadata.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from string import Template

from reconcilers.authoring.scaffold.names import Scaffold, ScaffoldError

#: a distribution name as PEP 508 allows it (letters, digits, `.`, `_`, `-`; starting and ending alphanumeric)
DIST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
#: the files of the repository around the package: path → template (`templates/project_<template>.tmpl`)
PROJECT_FILES = {"pyproject.toml": "pyproject.toml", "README.md": "README.md", "ci.sh": "ci.sh",
                 "Dockerfile": "Dockerfile", ".gitignore": "gitignore"}
#: files written executable
EXECUTABLE = ("ci.sh",)


@cache
def _template(name: str) -> Template:
    return Template(files(__package__).joinpath("templates", f"project_{name}.tmpl").read_text(encoding="utf-8"))


def opsconsole_version() -> str:
    """The installed opsconsole distribution's version (what the project's pyproject pins)."""
    try:
        return version("opsconsole")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0.1.0"


def check_dist_name(name: str) -> str:
    """The project directory's name as the distribution's; ScaffoldError when it cannot be one."""
    if not DIST_NAME.match(name):
        raise ScaffoldError(f"--project: {name!r} cannot name a Python distribution (letters, digits, '.', '_' "
                            "and '-', starting and ending with a letter or digit; e.g. website-kind)")
    return name


def render_project(s: Scaffold, dist: str, package_files: dict[str, str]) -> dict[str, str]:
    """Every file of the repository by relative path: the project files and the package's under `<package>/`."""
    values = {"kind": s.kind, "lower": s.kind.lower(), "group": s.group, "version": s.version, "plural": s.plural,
              "package": s.package, "dist": dist, "opsconsole_version": opsconsole_version(),
              "scope": "namespaced" if s.namespaced else "cluster-scoped"}
    out = {path: _template(name).substitute(values) for path, name in PROJECT_FILES.items()}
    out.update({f"{s.package}/{path}": text for path, text in package_files.items()})
    return out
