"""The pytest plugin `opsconsole.testing`, used as a kind author uses it: its fixtures (from the installed
`pytest11` entry point, no conftest) on the built-in Tenant and on a typed kind defined here (a Deployment child,
no Redis): reconcile_once, an invalid spec, reconcile_until, the start time; a scratch project outside the
repository running pytest with only the installed plugin; and the whole engine (`opsconsole_engine`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field, field_validator

from opsconsole.testing import TIMINGS, FakeContext
from opsconsole.testing.cluster import kubesim_running
from opsconsole.testing.kinds import KindNotFound, default_kinds, entry_point_kinds, find_kind
from reconcilers.core.kind import KindModel
from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import PermanentError, Result
from reconcilers.engine import kube
from reconcilers.engine.step import QueueAction
from reconcilers.kinds.tenant import TenantReconciler

ROOT = Path(__file__).resolve().parents[2]
SHELF = ResourceKind("plugin.opsconsole.io", "v1alpha1", "shelves", "Shelf", namespaced=True)
DEPLOYMENT = ResourceKind("apps", "v1", "deployments", "Deployment", namespaced=True)


class ShelfSpec(KindModel):
    """A Deployment of `replicas` pods running `image`."""

    replicas: int = Field(1, ge=0, le=5)
    """How many pods."""
    image: str = Field("nginx:1.27", min_length=1)
    """The container image (a tag other than latest)."""

    @field_validator("image")
    @classmethod
    def _pinned(cls, value: str) -> str:
        if value.endswith(":latest") or ":" not in value:
            raise ValueError("must name a tag other than latest")
        return value


class ShelfReconciler(Reconciler):
    """Applies a Deployment; Running once every replica of the current generation is ready."""

    resource: ClassVar[ResourceKind] = SHELF
    state_machine: ClassVar[StateMachine] = StateMachine.build(
        "Shelf", states=("Pending", "Running", "Failed"), initial="Pending",
        transitions={"Pending": ("Running", "Failed"), "Running": ("Pending", "Failed"),
                     "Failed": ("Pending", "Running")})
    owns: ClassVar[tuple[ResourceKind, ...]] = (DEPLOYMENT,)
    spec_model: ClassVar[Any] = ShelfSpec

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        spec: ShelfSpec = ctx.spec
        name = obj["metadata"]["name"]
        labels = {"app": name}
        dep = ctx.apply_child({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ctx.namespace, "labels": labels},
            "spec": {"replicas": spec.replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "shelf", "image": spec.image}]}}},
        })
        status = dep.get("status") or {}
        ready = int(status.get("readyReplicas") or 0)
        current = int(status.get("observedGeneration") or 0) >= int(dep["metadata"].get("generation") or 0)
        counts = f"{ready}/{spec.replicas} ready"
        if current and ready >= spec.replicas:
            return Result("Running", "AllReady", counts, status={"readyReplicas": ready})
        return Result("Pending", "RollingOut", counts, status={"readyReplicas": ready}, requeue_after=0.1)


@pytest.fixture(scope="session")
def opsconsole_kinds():
    """The kinds this module tests (overriding the plugin's default, as an author's module does)."""
    return [TenantReconciler, ShelfReconciler]


def shelf(name: str = "books", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "plugin.opsconsole.io/v1alpha1", "kind": "Shelf", "metadata": {"name": name},
            "spec": spec}


def test_the_cluster_starts_and_answers(kubesim_cluster, kind_crds):
    # how long it took is printed, not asserted (a timed assertion fails on a loaded machine and proves nothing):
    # bench/ measures start-up
    print(f"kubesim_cluster {TIMINGS['kubesim_cluster'] * 1000:.0f} ms, kind_crds {TIMINGS['kind_crds'] * 1000:.0f} ms")
    assert {c["spec"]["names"]["kind"] for c in kind_crds} == {"Tenant", "Shelf"}
    started = time.perf_counter()
    with kubesim_running() as handle:
        took = time.perf_counter() - started
        assert kube.server_version(kube.build_api_client(handle.kubeconfig))
    print(f"a second kubesim answered after {took * 1000:.0f} ms")


def test_reconcile_once_creates_the_object_in_the_test_namespace_and_applies_its_children(reconcile_once,
                                                                                          kube_namespace, kube_api):
    outcome = reconcile_once(shelf(replicas=2))
    assert outcome.phase == "Pending" and outcome.status["reason"] == "RollingOut"
    assert outcome.queue is QueueAction.REQUEUE_AFTER and outcome.delay == 0.1
    assert [t.to_phase for t in outcome.transitions] == ["Pending"]
    assert outcome.obj["metadata"]["namespace"] == kube_namespace
    [dep] = outcome.children
    assert dep["kind"] == "Deployment" and dep["spec"]["replicas"] == 2
    owner = dep["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Shelf" and owner["uid"] == outcome.obj["metadata"]["uid"]
    live = kube.get_object(kube_api, SHELF, kube_namespace, "books")
    assert live["status"]["phase"] == "Pending" and live["spec"] == {"replicas": 2, "image": "nginx:1.27"}


def test_a_cluster_scoped_kind_with_a_finalizer(reconcile_once, kube_api):
    name = f"acme-{uuid.uuid4().hex[:6]}"
    obj = {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant", "metadata": {"name": name},
           "spec": {"admins": ["alice"], "quota": {"cpu": "2"}}}
    outcome = reconcile_once(obj)
    assert outcome.phase == "Running", outcome.status
    assert [t.to_phase for t in outcome.transitions] == ["Pending", "Running"]
    assert {c["kind"] for c in outcome.children} == {"Namespace", "ResourceQuota", "RoleBinding"}
    assert TenantReconciler.finalizer in outcome.obj["metadata"]["finalizers"]
    again = reconcile_once(obj)  # Running is on record now: nothing to record, nothing written
    assert again.phase == "Running" and again.transitions == [] and again.change is not None
    kube.delete_object(kube_api, TenantReconciler.resource, None, name)


def test_an_invalid_spec_fails_naming_the_field(reconcile_once):
    outcome = reconcile_once(shelf(image="nginx:latest"))
    assert outcome.phase == "Failed"
    assert outcome.status["reason"] == "InvalidSpec"
    assert "spec.image: must name a tag other than latest" in outcome.status["message"]
    assert outcome.children == [] and outcome.queue is QueueAction.FORGET


def test_reconcile_until_waits_for_the_deployment_to_be_ready(reconcile_until):
    started = time.perf_counter()
    outcome = reconcile_until(shelf(replicas=2), "Running", timeout=10)
    assert outcome.status["readyReplicas"] == 2 and outcome.status["message"] == "2/2 ready"
    assert time.perf_counter() - started < 5


def test_reconcile_until_says_where_it_stopped(reconcile_until):
    with pytest.raises(AssertionError, match=r"did not reach phase 'Running'.*phase 'Failed', reason 'InvalidSpec'"):
        reconcile_until(shelf(image="nginx"), "Running", timeout=0.3)


def test_an_object_the_crd_refuses_is_not_reconciled(reconcile_once):
    with pytest.raises(ValueError, match=r"refused to create Shelf books: .*spec.replicas"):
        reconcile_once(shelf(replicas=9))  # the generated CRD has maximum: 5


def test_an_object_of_a_kind_not_under_test_is_named(reconcile_once):
    with pytest.raises(LookupError, match="no kind under test reconciles example.com/v1 Thing"):
        reconcile_once({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"}})


def test_the_default_kinds_come_from_the_ini_option_else_the_entry_points():
    assert default_kinds(["reconcilers.kinds.tenant.TenantReconciler", "reconcilers.kinds.tenant:TenantReconciler"]) \
        == [TenantReconciler]
    assert default_kinds([]) == entry_point_kinds()
    with pytest.raises(ImportError, match="opsconsole_kinds: cannot import kind 'reconcilers.kinds.nope.X'"):
        default_kinds(["reconcilers.kinds.nope.X"])
    with pytest.raises(TypeError, match="is not a Reconciler subclass"):
        default_kinds(["reconcilers.kinds.tenant.TENANT"])
    with pytest.raises(KindNotFound, match="override the `opsconsole_kinds` fixture"):
        find_kind([], "a.example.com/v1", "X")


def test_fake_context_types_the_spec_as_the_engine_does():
    obj = shelf(replicas=3)
    obj["metadata"].update(namespace="ns", uid="u1", generation=2)
    obj["status"] = {"observedGeneration": 1}
    ctx = FakeContext(obj, ShelfReconciler)
    assert ctx.spec == ShelfSpec(replicas=3) and ctx.spec_changed
    assert FakeContext(obj).spec == ShelfSpec(replicas=3)  # found by apiVersion + kind
    assert FakeContext(obj, spec_model=None).spec == ShelfSpec(replicas=3)
    bad = FakeContext({**obj, "spec": {"replicas": 9}}, ShelfReconciler)
    with pytest.raises(PermanentError, match=r"spec.replicas: must be at most 5") as info:
        ShelfReconciler().reconcile(bad, bad.obj)
    assert info.value.reason == "InvalidSpec" and bad.applied == []


# -- a kind author's project, outside this repository --------------------------------------------------------

AUTHOR_KIND = '''
"""A typed kind of the scratch project."""
from typing import Any, ClassVar

from pydantic import Field, field_validator

from reconcilers.core.kind import KindModel
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result


class NoteSpec(KindModel):
    text: str = Field(min_length=1)
    copies: int = Field(1, ge=1, le=3)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value):
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class NoteReconciler(Reconciler):
    resource: ClassVar[ResourceKind] = ResourceKind("notes.example.org", "v1", "notes", "Note")
    state_machine: ClassVar[StateMachine] = StateMachine.build(
        "Note", states=("Pending", "Ready", "Failed"), initial="Pending",
        transitions={"Pending": ("Ready", "Failed"), "Ready": ("Failed",), "Failed": ("Ready",)})
    owns: ClassVar[tuple[ResourceKind, ...]] = (ResourceKind("", "v1", "configmaps", "ConfigMap"),)
    spec_model: ClassVar[Any] = NoteSpec

    def reconcile(self, ctx, obj):
        name = obj["metadata"]["name"]
        ctx.apply_child({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": name, "namespace": ctx.namespace},
                         "data": {"text": ctx.spec.text * ctx.spec.copies}})
        return Result("Ready", "Written", f"{ctx.spec.copies} copies")
'''

AUTHOR_TESTS = '''
"""The author's tests: the kind from the ini option, the plugin's fixtures, no conftest.py."""
import os
import sys


def note(**spec):
    return {"apiVersion": "notes.example.org/v1", "kind": "Note", "metadata": {"name": "n1"}, "spec": spec}


def test_reconcile_once(reconcile_once, kube_namespace):
    outcome = reconcile_once(note(text="hi", copies=2))
    assert outcome.phase == "Ready", outcome.status
    assert outcome.obj["metadata"]["namespace"] == kube_namespace
    [cm] = outcome.children
    assert cm["data"] == {"text": "hihi"}


def test_an_invalid_spec(reconcile_once):
    outcome = reconcile_once(note(text="   "))  # the CRD's schema lets it through, the model does not
    assert outcome.phase == "Failed" and outcome.status["reason"] == "InvalidSpec"
    assert "spec.text: must not be blank" in outcome.status["message"]


def test_no_django_in_this_process():
    assert "django.db" not in sys.modules and "django.apps" not in sys.modules
    assert not any("/work/main" in p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
'''

AUTHOR_OVERRIDE_TESTS = '''
"""A module choosing its kinds by overriding the fixture."""
import pytest
from author_kind import NoteReconciler


@pytest.fixture(scope="session")
def opsconsole_kinds():
    return [NoteReconciler]


def test_reconcile_until(reconcile_until):
    obj = {"apiVersion": "notes.example.org/v1", "kind": "Note", "metadata": {"name": "n2"},
           "spec": {"text": "x"}}
    assert reconcile_until(obj, "Ready", timeout=5).status["message"] == "1 copies"
'''


def test_a_kind_authors_project_gets_the_fixtures_from_the_installed_plugin(tmp_path):
    project = tmp_path / "author"
    project.mkdir()
    assert ROOT not in project.parents
    (project / "author_kind.py").write_text(textwrap.dedent(AUTHOR_KIND))
    (project / "test_notes.py").write_text(textwrap.dedent(AUTHOR_TESTS))
    (project / "test_override.py").write_text(textwrap.dedent(AUTHOR_OVERRIDE_TESTS))
    (project / "pytest.ini").write_text("[pytest]\nopsconsole_kinds =\n    author_kind.NoteReconciler\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:django", "-p", "no:cacheprovider"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout
    assert not (project / "conftest.py").exists()


# -- the whole engine ----------------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_engine_reconciles_a_shelf_until_it_runs(opsconsole_engine, kube_api, kube_namespace):
    obj = kube.create_object(kube_api, SHELF, {**shelf("engine", replicas=2),
                                               "metadata": {"name": "engine", "namespace": kube_namespace}})
    live = opsconsole_engine.wait_for_phase(obj, "Running", timeout=20)
    assert live["status"]["readyReplicas"] == 2
    assert opsconsole_engine.wait_for_phase((kube_namespace, "engine", "Shelf"), "Running", timeout=1)
    assert kube.get_object(kube_api, DEPLOYMENT, kube_namespace, "engine")["spec"]["replicas"] == 2
