"""The scaffold's plan and its writing: `plan(...)` checks every input and the target and renders every file in
memory (a `ScaffoldError` before anything is written); `write` writes them all or none; `next_steps` is what the
command prints afterwards."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from reconcilers.authoring.scaffold.checks import (
    check_group,
    check_kind,
    check_package,
    check_scope,
    check_target,
    check_version,
    parse_owns,
)
from reconcilers.authoring.scaffold.names import DEFAULT_VERSION, PLURAL, Scaffold, ScaffoldError, plural_of
from reconcilers.authoring.scaffold.project import EXECUTABLE, check_dist_name, render_project
from reconcilers.authoring.scaffold.rendering import render
from reconcilers.authoring.scaffold.stateful import with_budget
from reconcilers.engine import registry


def plan(kind: str, group: str, *, version: str = DEFAULT_VERSION, owns: str = "", cluster_scoped: bool = False,
         package_dir: str | os.PathLike[str] | None = None, plural: str | None = None,
         cwd: str | os.PathLike[str] | None = None, project: str | os.PathLike[str] | None = None) -> Scaffold:
    """Check everything and render every file; ScaffoldError (nothing written) naming the first problem. With
    `project`, the kind is a repository of its own in that directory (`package_dir` then names the package
    inside it)."""
    check_kind(kind)
    check_group(group)
    check_version(version)
    plural = plural or plural_of(kind)
    if not PLURAL.match(plural):
        raise ScaffoldError(f"plural {plural!r} must be a lower-case DNS label (e.g. websites)")
    owned = with_budget(parse_owns(owns))  # a lone StatefulSet gets its PodDisruptionBudget (scaffold.stateful)
    namespaced = not cluster_scoped
    check_scope(namespaced, owned)
    base = Path(cwd) if cwd is not None else Path.cwd()
    root = (base / project).resolve() if project else None
    if root is not None and package_dir and Path(package_dir).name != str(package_dir).rstrip("/"):
        raise ScaffoldError(f"--package {package_dir!r}: with --project, name the package only (e.g. --package "
                            f"{kind.lower()}); it goes inside the project directory")
    directory = ((root or base) / (package_dir if package_dir else kind.lower())).resolve()
    package = directory.name
    check_package(package, directory)
    dist = check_dist_name(root.name) if root is not None else ""
    for rec in registry.registered():
        if (rec.resource.group, rec.resource.plural) == (group, plural):
            raise ScaffoldError(f"{plural}.{group} is already reconciled by the registered kind {rec.resource.kind}")
    scaffold = Scaffold(kind, group, version, plural, namespaced, package, directory, owned, {}, dist)
    files = render(scaffold)
    if root is not None:
        files = render_project(scaffold, dist, files)
        directory = root
    check_target(directory, files)
    for name, text in files.items():
        if name.endswith(".py"):
            compile(text, name, "exec")  # a template bug fails here, before anything is written
    return Scaffold(kind, group, version, plural, namespaced, package, directory, owned, files, dist)


def write(scaffold: Scaffold) -> list[Path]:
    """Write the package: into a temporary directory beside the target, then renamed into place (all or none).
    Returns the paths written."""
    parent = scaffold.directory.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{scaffold.package}-", dir=parent))
    try:
        for name, text in scaffold.files.items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            if name in EXECUTABLE:
                path.chmod(0o755)
        if scaffold.directory.is_dir():
            scaffold.directory.rmdir()  # empty (checked): the rename takes its place
        os.rename(tmp, scaffold.directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [scaffold.directory / name for name in scaffold.files]


def next_steps(scaffold: Scaffold, shown_dir: str) -> str:
    """What to do next, as printed by the command (`shown_dir`: the package directory as the user named it)."""
    s = scaffold
    lower = s.kind.lower()
    if s.project:
        return _project_steps(s, shown_dir)
    parent = s.directory.parent
    pythonpath = "" if parent == Path.cwd().resolve() else f"PYTHONPATH={parent} "
    env = f"{pythonpath}OPSCONSOLE_RECONCILERS={s.reconciler_path}"
    return "\n".join([
        "Next steps:",
        f"  1. Edit {shown_dir}/kind.py: the spec model (# your fields here), the children and reconcile().",
        f"  2. Run its tests:   {pythonpath}pytest {shown_dir}",
        f"  3. See its CRD:     {env} python manage.py crds {s.kind}",
        f"  4. Run it:          {env} make run",
        f"  5. Apply the sample: kubectl --kubeconfig data/kubeconfig apply -f {shown_dir}/samples/{lower}.yaml",
        f"     and watch it:     kubectl --kubeconfig data/kubeconfig get {s.plural}.{s.group} -w",
        "  6. Package it: in your project's pyproject.toml (then `pip install -e .`: no OPSCONSOLE_RECONCILERS needed)",
        '       [project.entry-points."opsconsole.kinds"]',
        f'       {s.kind.lower()} = "{s.package}.kind:{s.kind}Reconciler"',
    ])



def _project_steps(s: Scaffold, shown_dir: str) -> str:
    return "\n".join([
        "Next steps:",
        f"  1. Edit {shown_dir}/{s.package}/kind.py: the spec model (# your fields here), the children and "
        "reconcile().",
        f"  2. Run its tests:   cd {shown_dir} && ./ci.sh   (pip must find opsconsole: see README.md)",
        f"  3. See its CRD:     opsconsole crds {s.kind}   (installed, the entry point registers it)",
        f"  4. Ship it:         docker build --build-arg OPSCONSOLE_IMAGE=<your opsconsole image> -t {s.project} "
        f"{shown_dir}",
        "  Workers and the controller import kinds when they start: restart them after changing its code.",
    ])
