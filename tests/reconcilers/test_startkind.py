"""`manage.py startkind`: the scaffolded package imports, generates its CRD (which accepts the sample), passes the
project's ruff rules and its own generated test (run with pytest in a subprocess, through the opsconsole pytest
plugin); every refused input or target is a CommandError that writes nothing and overwrites nothing."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from kubesim import schema as kubesim_schema
from reconcilers.authoring.scaffold import plural_of
from reconcilers.core.crd import crd_manifest
from reconcilers.engine import registry

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "website": ("Website", ["--owns", "apps/v1/Deployment,v1/Service"], ["Deployment", "Service"]),
    "gizmo": ("Gizmo", ["--version", "v2beta3"], []),
    "realm": ("Realm", ["--cluster-scoped", "--owns", "v1/Namespace"], ["Namespace"]),
}
#: how many tests each generated package has
GENERATED_TESTS = {"website": 4, "gizmo": 2, "realm": 2}


@pytest.fixture(autouse=True)
def builtins_only(builtin_kinds_only):
    """Every test here sees exactly the built-in kinds."""


def startkind(*args: str) -> str:
    out = StringIO()
    call_command("startkind", *args, stdout=out)
    return out.getvalue()


def plugin_installed() -> bool:
    return any(ep.value.split(":")[0].startswith("opsconsole.testing") for ep in entry_points(group="pytest11"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory, django_db_blocker):
    """The three cases scaffolded once, each into its own directory: name → (directory, output)."""
    out = {}
    for package, (kind, args, _) in CASES.items():
        base = tmp_path_factory.mktemp(package)
        registry.reset()
        out[package] = (base, startkind(kind, "--group", "example.com", "--package", str(base / package), *args))
    return out


def load(base: Path, package: str):
    sys.path.insert(0, str(base))
    try:
        return importlib.import_module(f"{package}.kind")
    finally:
        sys.path.remove(str(base))
        for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
            del sys.modules[name]


@pytest.mark.parametrize("package", CASES)
def test_the_package_imports_its_crd_generates_and_accepts_the_sample(generated, package):
    base, output = generated[package]
    kind, args, children = CASES[package]
    files = sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())
    assert files == [f"{package}/__init__.py", f"{package}/kind.py", f"{package}/samples/{package}.yaml",
                     f"{package}/tests/__init__.py", f"{package}/tests/test_{package}.py"]
    cls = getattr(load(base, package), f"{kind}Reconciler")
    crd = crd_manifest(cls)
    assert crd["metadata"]["name"] == f"{plural_of(kind)}.example.com"
    assert crd["spec"]["scope"] == ("Cluster" if "--cluster-scoped" in args else "Namespaced")
    assert [o.kind for o in cls.owns] == children and cls.spec_change_phase == "Pending"
    version = crd["spec"]["versions"][0]
    assert version["name"] == ("v2beta3" if package == "gizmo" else "v1alpha1")
    sample = yaml.safe_load((base / package / "samples" / f"{package}.yaml").read_text())
    checked = kubesim_schema.process(sample, version["schema"]["openAPIV3Schema"])
    assert checked.causes == [] and checked.unknown == []
    assert cls.spec_model.model_validate(sample["spec"])  # the sample's spec is valid for the engine too
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec_schema["description"] == f"The desired state of a {kind}."
    assert "snake_case" not in json.dumps(crd)  # a note for the author, not for `kubectl explain`
    assert "Next steps:" in output and f"pytest {base / package}" in output
    assert f'{package} = "{package}.kind:{kind}Reconciler"' in output
    assert f"OPSCONSOLE_RECONCILERS={package}.kind.{kind}Reconciler make run" in output


def test_the_deployment_kind_has_the_fields_columns_and_status_of_a_workload(generated):
    base, _ = generated["website"]
    cls = load(base, "website").WebsiteReconciler
    spec = cls.spec_model()
    assert (spec.image, spec.replicas, spec.port, spec.labels) == ("nginx:1.27-alpine", 1, 80, {})
    props = crd_manifest(cls)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    assert props["spec"]["properties"]["replicas"] == {"type": "integer", "description": "Number of pods.",
                                                       "default": 1, "minimum": 0, "maximum": 100}
    assert "readyReplicas" in props["status"]["properties"]
    assert [c.name for c in cls.printer_columns] == ["Ready", "Replicas", "Image"]
    with pytest.raises(ValueError, match="not a valid Kubernetes label"):
        cls.spec_model.model_validate({"labels": {"not a label": "x"}})


@pytest.mark.parametrize("package", CASES)
def test_the_generated_files_pass_ruff(generated, package):
    base, _ = generated[package]
    first_party = f"lint.isort.known-first-party=['reconcilers', 'opsconsole', 'kubesim', '{package}']"
    proc = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                           "--config", first_party, str(base / package)],
                          capture_output=True, text=True, cwd=base)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(not plugin_installed(), reason="the opsconsole.testing pytest plugin is not installed")
@pytest.mark.long_unit
def test_the_generated_tests_pass(generated):
    procs = {}
    for package in CASES:  # the three at once: each starts its own kubesim
        base, _ = generated[package]
        env = {**os.environ, "PYTHONPATH": str(base)}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env.pop("DATABASE_URL", None)  # the rollback test's engine records into a SQLite file of its own
        procs[package] = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django", package],
            cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for package, proc in procs.items():
        output, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"{package}:\n{output}"
        # a kind that owns a Deployment gets the broken-image tests too: not reported ready, and rolled back
        assert f"{GENERATED_TESTS[package]} passed" in output, output


def test_the_default_package_is_the_kind_in_lower_case_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output = startkind("Policy", "--group", "policies.example.org", "--owns", "v1/ConfigMap")
    assert (tmp_path / "policy" / "kind.py").is_file() and "pytest policy" in output
    assert "PYTHONPATH" not in output
    text = (tmp_path / "policy" / "kind.py").read_text()
    assert '"policies", "Policy", namespaced=True' in text and "def config_map_manifest" in text


def test_plural_rule_and_override(tmp_path):
    assert [plural_of(k) for k in ("Website", "Policy", "Gateway", "Box", "Bus", "Match", "Mesh")] == [
        "websites", "policies", "gateways", "boxes", "buses", "matches", "meshes"]
    startkind("Octopus", "--group", "sea.example.com", "--plural", "octopi", "--package", str(tmp_path / "octo"))
    assert '"octopi", "Octopus"' in (tmp_path / "octo" / "kind.py").read_text()


# -- refusals: a clear CommandError, nothing written -------------------------------------------------------------


REFUSED = [
    (["website", "--group", "web.example.com"], "UpperCamelCase"),
    (["Web_Site", "--group", "web.example.com"], "UpperCamelCase"),
    (["2Web", "--group", "web.example.com"], "UpperCamelCase"),
    (["Web-Site", "--group", "web.example.com"], "UpperCamelCase"),
    (["Website", "--group", "example"], "at least one dot"),
    (["Website", "--group", "Web.Example.com"], "DNS subdomain"),
    (["Website", "--group=web-.example.com"], "DNS subdomain"),
    (["Website", "--group", "web.k8s.io"], "reserved"),
    (["Website", "--group", "web.example.com", "--version", "v1.0"], "not a Kubernetes API version"),
    (["Website", "--group", "web.example.com", "--version", "1"], "not a Kubernetes API version"),
    (["Website", "--group", "web.example.com", "--version", "v1alpha"], "not a Kubernetes API version"),
    (["Website", "--group", "web.example.com", "--owns", "Deployment"], "group/version/Kind"),
    (["Website", "--group", "web.example.com", "--owns", "a/b/v1/Deployment"], "group/version/Kind"),
    (["Website", "--group", "web.example.com", "--owns", "apps/Deployment/v1"], "not a Kubernetes API version"),
    (["Website", "--group", "web.example.com", "--owns", "apps/v1/deployment"], "not a kind"),
    (["Website", "--group", "web.example.com", "--owns", "Apps/v1/Deployment"], "not an API group"),
    (["Website", "--group", "web.example.com", "--owns", "v1/Service,v1/Service"], "twice"),
    (["Memcached", "--group", "web.example.com"], "registered kind Memcached"),
    (["Tenant", "--group", "tenancy.example.com"], "registered kind Tenant"),
    (["Deployment", "--group", "web.example.com"], "built-in Kubernetes kind"),
    (["Pod", "--group", "web.example.com"], "built-in Kubernetes kind"),
    (["Service", "--group", "web.example.com"], "built-in Kubernetes kind"),
    (["Website", "--group", "web.example.com", "--plural", "Websites"], "plural"),
    (["Website", "--group", "web.example.com", "--cluster-scoped", "--owns", "apps/v1/Deployment,v1/Namespace"],
     "--cluster-scoped with namespaced --owns kinds (apps/v1/Deployment)"),
    (["Website", "--group", "web.example.com", "--owns", "v1/Namespace"], "cannot own cluster-scoped kinds"),
    (["Website", "--group", "web.example.com", "--project", "web kind"], "cannot name a Python distribution"),
    (["Website", "--group", "web.example.com", "--project", "web_"], "cannot name a Python distribution"),
    (["Website", "--group", "web.example.com", "--project", "web-kind", "--package", "src/web"], "name the package"),
]


@pytest.mark.parametrize(("args", "message"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_bad_input_is_refused_and_nothing_is_written(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CommandError) as err:
        startkind(*args)
    assert message in str(err.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["json", "reconcilers", "opsconsole", "kubesim", "os", "pytest", "my-kind",
                                  "class", "Website"])
def test_a_package_name_that_is_no_identifier_or_shadows_a_module_is_refused(tmp_path, name):
    with pytest.raises(CommandError) as err:
        startkind("Website", "--group", "web.example.com", "--package", str(tmp_path / name))
    assert repr(name) in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_target_is_never_overwritten(tmp_path):
    package = tmp_path / "website"
    package.mkdir()
    (package / "kind.py").write_text("# mine\n")
    with pytest.raises(CommandError, match="refusing to overwrite .*website/kind.py"):
        startkind("Website", "--group", "web.example.com", "--package", str(package))
    assert [p.name for p in tmp_path.iterdir()] == ["website"]
    assert [p.name for p in package.iterdir()] == ["kind.py"] and (package / "kind.py").read_text() == "# mine\n"

    (package / "kind.py").rename(package / "notes.txt")  # a non-empty directory: not written into either
    with pytest.raises(CommandError, match="website exists and is not empty"):
        startkind("Website", "--group", "web.example.com", "--package", str(package))
    assert [p.name for p in package.iterdir()] == ["notes.txt"]

    target = tmp_path / "gizmo"
    target.write_text("a file\n")
    with pytest.raises(CommandError, match="gizmo exists and is not a directory"):
        startkind("Gizmo", "--group", "web.example.com", "--package", str(target))
    assert target.read_text() == "a file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gizmo", "website"]


def test_an_existing_empty_directory_is_filled(tmp_path):
    (tmp_path / "website").mkdir()
    startkind("Website", "--group", "web.example.com", "--package", str(tmp_path / "website"))
    assert (tmp_path / "website" / "kind.py").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["website"]  # no temporary directory left behind


# -- --project: a repository of its own --------------------------------------------------------------------------


def test_a_project_is_a_repository_of_its_own_around_the_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output = startkind("StaticSite", "--group", "web.example.com", "--owns", "apps/v1/Deployment,v1/Service",
                       "--project", "staticsite-kind")
    project = tmp_path / "staticsite-kind"
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert files == [".gitignore", "Dockerfile", "README.md", "ci.sh", "pyproject.toml", "staticsite/__init__.py",
                     "staticsite/kind.py", "staticsite/samples/staticsite.yaml", "staticsite/tests/__init__.py",
                     "staticsite/tests/test_staticsite.py"]
    meta = tomllib.loads((project / "pyproject.toml").read_text())
    assert meta["project"]["name"] == "staticsite-kind"
    assert meta["project"]["dependencies"] == [f"opsconsole=={importlib.metadata.version('opsconsole')}"]
    assert meta["project"]["entry-points"]["opsconsole.kinds"] == {
        "staticsite": "staticsite.kind:StaticSiteReconciler"}
    assert meta["tool"]["pytest"]["ini_options"]["testpaths"] == ["staticsite"]
    assert (project / "ci.sh").stat().st_mode & 0o111
    assert subprocess.run(["bash", "-n", str(project / "ci.sh")], capture_output=True).returncode == 0
    ci = (project / "ci.sh").read_text()
    assert "pip install -q -e '.[test]'" in ci and "python -m pytest" in ci and '"$(dirname "$0")"' in ci
    dockerfile = (project / "Dockerfile").read_text()
    assert "FROM ${OPSCONSOLE_IMAGE}" in dockerfile and "pip install --no-cache-dir --no-deps" in dockerfile
    assert "from staticsite.kind import StaticSiteReconciler" in (project / "staticsite/tests/test_staticsite.py"
                                                                  ).read_text()
    assert "cd staticsite-kind && ./ci.sh" in output and "opsconsole crds StaticSite" in output
    assert "restart them after changing its code" in output
    readme = (project / "README.md").read_text()
    assert "PIP_FIND_LINKS" in readme and "restart them after changing its code" in readme


def test_the_kinds_docstring_names_the_crds_command_of_its_mode(tmp_path, monkeypatch):
    """In a checkout `manage.py crds` needs the reconciler's path; in a repository of its own the installed
    `opsconsole crds` finds the kind through the project's entry point (there is no manage.py there)."""
    monkeypatch.chdir(tmp_path)
    startkind("Website", "--group", "web.example.com")
    startkind("StaticSite", "--group", "web.example.com", "--project", "staticsite-kind")
    checkout = (tmp_path / "website" / "kind.py").read_text()
    project = (tmp_path / "staticsite-kind" / "staticsite" / "kind.py").read_text()
    assert "`OPSCONSOLE_RECONCILERS=website.kind.WebsiteReconciler python manage.py crds Website`" in checkout
    assert "scaffolded by `manage.py startkind`" in checkout
    assert "`opsconsole crds StaticSite`" in project and "scaffolded by `opsconsole startkind --project`" in project
    assert "manage.py" not in project


def test_a_project_directory_is_never_overwritten(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "web-kind").mkdir()
    (tmp_path / "web-kind" / "README.md").write_text("mine\n")
    with pytest.raises(CommandError, match="refusing to overwrite .*web-kind/README.md"):
        startkind("Website", "--group", "web.example.com", "--project", "web-kind")
    assert [p.name for p in (tmp_path / "web-kind").iterdir()] == ["README.md"]
