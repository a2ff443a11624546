"""`startkind --owns apps/v1/StatefulSet`: the generated kind owns a PodDisruptionBudget beside the StatefulSet,
spreads its pods across zones, refuses a budget that can never be met, and upgrades one ordinal at a time (2, 1, 0)
through reconcilers.core.ordered_upgrade, blocked while the budget allows no disruption; its files pass ruff and
its own generated tests pass."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from opsconsole.testing import FakeContext
from reconcilers.core import ordered_upgrade as ou
from reconcilers.core.crd import crd_manifest
from reconcilers.engine import registry

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
ZONES = ("zone-a", "zone-b", "zone-c")


@pytest.fixture(autouse=True)
def builtins_only(builtin_kinds_only):
    yield


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    base = tmp_path_factory.mktemp("stateful")
    registry.reset()
    out = StringIO()
    call_command("startkind", "Datastore", "--group", "example.com", "--package", str(base / "datastore"),
                 "--owns", "apps/v1/StatefulSet,v1/Service", stdout=out)
    sys.path.insert(0, str(base))
    try:
        module = importlib.import_module("datastore.kind")
    finally:
        sys.path.remove(str(base))
    yield base, module
    for name in [m for m in sys.modules if m == "datastore" or m.startswith("datastore.")]:
        del sys.modules[name]


def obj(image="nginx:1.27", status=None):
    return {"apiVersion": "example.com/v1alpha1", "kind": "Datastore",
            "metadata": {"name": "ds", "namespace": "db", "uid": "u-ds", "generation": 1},
            "spec": {"replicas": 3, "image": image, "minAvailable": 2}, "status": status or {}}


def cluster(ctx, module, *, unready=()):
    """The StatefulSet and disruption controllers' view of the applied StatefulSet (pods replaced at once)."""
    sts = ctx.find("apps/v1", "StatefulSet", "db", "ds")
    revision = "ds-" + sts["metadata"]["annotations"][module.TEMPLATE_HASH]
    partition = sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
    for i in range(3):
        ctx.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": {ou.ZONE_KEY: ZONES[i]}}})
        old = ctx.find("v1", "Pod", "db", f"ds-{i}")
        rev = revision if i >= partition or old is None else old["metadata"]["labels"][ou.REVISION_LABEL]
        ctx.put({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"ds-{i}", "namespace": "db",
                              "labels": {**module.selector_labels(ctx.obj), ou.REVISION_LABEL: rev}},
                 "spec": {"nodeName": f"n{i}"},
                 "status": {"conditions": [{"type": "Ready", "status": "False" if i in unready else "True"}]}})
    updated = sum(1 for i in range(3)
                  if ctx.find("v1", "Pod", "db", f"ds-{i}")["metadata"]["labels"][ou.REVISION_LABEL] == revision)
    generation = sts["metadata"].get("generation", 0) + 1
    sts["metadata"]["generation"] = generation
    sts["status"] = {"observedGeneration": generation, "replicas": 3, "readyReplicas": 3 - len(unready),
                     "updatedReplicas": updated, "updateRevision": revision, "currentRevision": "ds-old"}
    pdb = ctx.find("policy/v1", "PodDisruptionBudget", "db", "ds")
    pdb["metadata"]["generation"] = 1
    pdb["status"] = {"observedGeneration": 1, "disruptionsAllowed": max(0, 3 - len(unready) - 2)}


def run(rec, ctx):
    result = rec.reconcile(ctx, ctx.obj)
    merged = {**ctx.obj.get("status", {}), **result.status, "phase": result.phase, "reason": result.reason}
    ctx.obj["status"] = {k: v for k, v in merged.items() if v is not None}
    return result


def test_it_owns_a_budget_and_a_spread_statefulset_and_refuses_a_budget_never_met(generated):
    _, module = generated
    cls = module.DatastoreReconciler
    assert [o.kind for o in cls.owns] == ["StatefulSet", "Service", "PodDisruptionBudget"]
    assert {k.kind for k in cls.rbac_reads} == {"Pod", "Node"}
    assert {"Upgrading", "Replacing", "Blocked"} <= set(cls.state_machine.states)
    props = crd_manifest(cls)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert props["minAvailable"].get("x-kubernetes-int-or-string") is True
    spec = cls.spec_model.model_validate(obj()["spec"])
    sts = module.stateful_set_manifest(obj(), spec, 3)
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    assert sts["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert module.pod_disruption_budget_manifest(obj(), spec)["spec"]["minAvailable"] == 2
    refused = cls().validate({"spec": {"replicas": 3, "minAvailable": 3}}, None, None)
    assert refused and refused[0].startswith("spec.minAvailable:")


def test_the_generated_kind_upgrades_2_1_0_and_blocks_on_the_budget(generated):
    _, module = generated
    rec = module.DatastoreReconciler()
    ctx = FakeContext(obj(), rec)
    run(rec, ctx)
    cluster(ctx, module)
    assert run(rec, ctx).phase == "Running"
    ctx.obj["spec"]["image"] = "nginx:1.28"
    ctx.spec = rec.spec_model.model_validate(ctx.obj["spec"])
    assert run(rec, ctx).phase == "Upgrading"
    cluster(ctx, module, unready={0})
    blocked = run(rec, ctx)
    assert (blocked.phase, blocked.reason) == ("Blocked", ou.BUDGET_EXHAUSTED)
    moved = []
    for _ in range(12):
        cluster(ctx, module)
        result = run(rec, ctx)
        if result.phase == "Replacing" and result.reason == "OrdinalMoved":
            moved.append(int(re.match(r"ordinal (\d+)", result.message).group(1)))
        if result.phase == "Running":
            break
    assert moved == [2, 1, 0] and result.phase == "Running"


def test_the_generated_files_pass_ruff(generated):
    base, _ = generated
    first_party = "lint.isort.known-first-party=['reconcilers', 'opsconsole', 'kubesim', 'datastore']"
    proc = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                           "--config", first_party, str(base / "datastore")], capture_output=True, text=True, cwd=base)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_generated_tests_pass_on_kubesim_zones(generated):
    base, _ = generated
    env = {**os.environ, "PYTHONPATH": str(base)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("DATABASE_URL", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django",
                           "datastore"], cwd=base, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
