"""KVStoreReconciler on a FakeContext: its children, the budget refused at admission, and the ordered upgrade one
step per reconcile (2, 1, 0), blocked on the budget and resumed, resumed from the live partition after a kill."""

from __future__ import annotations

import re

import pytest

from opsconsole.testing import FakeContext
from reconcilers.core import ordered_upgrade as ou
from reconcilers.core.reconciler import AdmissionUser
from reconcilers.core.types import PermanentError
from reconcilers.engine.admission import review_validate
from reconcilers.kinds import kvstore
from reconcilers.kinds.kvstore import BLOCKED, PENDING, REPLACING, RUNNING, UPGRADING, KVStoreReconciler
from reconcilers.kinds.kvstore_manifests import selector_labels, template_hash

ZONES = ("zone-a", "zone-b", "zone-c")


def cr(image="redis:7.2", *, replicas=3, min_available=2, status=None, generation=1):
    return {"apiVersion": "stateful.example.com/v1alpha1", "kind": "KVStore",
            "metadata": {"name": "kv", "namespace": "db", "uid": "u-kv", "generation": generation},
            "spec": {"replicas": replicas, "image": image, "minAvailable": min_available},
            "status": status or {}}


def cluster(ctx, *, unready=(), replace=True):
    """What the StatefulSet and disruption controllers would make of the applied StatefulSet: ordinals at or above
    the partition on the new revision (unless `replace` is False), Ready unless named in `unready`."""
    sts = ctx.find("apps/v1", "StatefulSet", "db", "kv")
    revision = "kv-" + template_hash(sts["spec"]["template"])
    partition = sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
    for i in range(3):
        ctx.put({"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": f"node-{i}", "labels": {ou.ZONE_KEY: ZONES[i]}}})
        old = ctx.find("v1", "Pod", "db", f"kv-{i}")
        rev = revision if (i >= partition and replace) or old is None else \
            old["metadata"]["labels"][ou.REVISION_LABEL]
        ready = "False" if i in unready else "True"
        ctx.put({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"kv-{i}", "namespace": "db",
                              "labels": {**selector_labels("kv"), ou.REVISION_LABEL: rev}},
                 "spec": {"nodeName": f"node-{i}"},
                 "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}})
    pods = [ctx.find("v1", "Pod", "db", f"kv-{i}") for i in range(3)]
    updated = sum(1 for p in pods if p["metadata"]["labels"][ou.REVISION_LABEL] == revision)
    ready = 3 - len(unready)
    sts["metadata"]["generation"] = sts["metadata"].get("generation", 0) + 1
    sts["status"] = {"observedGeneration": sts["metadata"]["generation"], "replicas": 3, "readyReplicas": ready,
                     "updatedReplicas": updated, "updateRevision": revision,
                     "currentRevision": revision if updated == 3 else "kv-old"}
    pdb = ctx.find("policy/v1", "PodDisruptionBudget", "db", "kv")
    pdb["status"] = {"observedGeneration": 1, "disruptionsAllowed": max(0, ready - 2)}
    pdb["metadata"]["generation"] = 1


def run(rec, ctx):
    """One reconcile, its status written back as the engine would."""
    result = rec.reconcile(ctx, ctx.obj)
    status = {**(ctx.obj.get("status") or {}), **result.status, "phase": result.phase, "reason": result.reason,
              "message": result.message}
    ctx.obj["status"] = {k: v for k, v in status.items() if v is not None}
    return result


def running(image="redis:7.2"):
    ctx = FakeContext(cr(image))
    rec = KVStoreReconciler()
    run(rec, ctx)
    cluster(ctx)
    assert run(rec, ctx).phase == RUNNING
    return rec, ctx


def test_a_new_kvstore_gets_a_headless_service_a_budget_and_a_spread_statefulset():
    ctx = FakeContext(cr())
    result = KVStoreReconciler().reconcile(ctx, ctx.obj)
    svc = ctx.find("v1", "Service", "db", "kv")
    pdb = ctx.find("policy/v1", "PodDisruptionBudget", "db", "kv")
    sts = ctx.find("apps/v1", "StatefulSet", "db", "kv")
    assert svc["spec"]["clusterIP"] == "None"
    assert pdb["spec"]["minAvailable"] == 2 and pdb["spec"]["selector"]["matchLabels"] == selector_labels("kv")
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    spread = sts["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread == [{"maxSkew": 1, "topologyKey": ou.ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
                       "labelSelector": {"matchLabels": selector_labels("kv")}}]
    assert result.phase == PENDING


def test_a_budget_that_can_never_be_met_is_refused_at_admission_and_by_the_reconciler():
    rec = KVStoreReconciler()
    user = AdmissionUser("alice")
    assert rec.validate(cr(min_available=2), None, user) == []
    refused = rec.validate(cr(min_available=3), None, user)
    assert len(refused) == 1 and refused[0].startswith("spec.minAvailable:") and "below replicas" in refused[0]
    assert rec.validate(cr(min_available="100%"), None, user)
    with pytest.raises(PermanentError, match="spec.minAvailable"):
        rec.reconcile(FakeContext(cr(min_available=3)), cr(min_available=3))


def test_an_image_change_upgrades_ordinals_2_1_0_one_step_per_reconcile():
    rec, ctx = running()
    ctx.obj["spec"]["image"] = "redis:7.4"
    ctx.spec = kvstore.KVStoreSpec.model_validate(ctx.obj["spec"])
    started = run(rec, ctx)
    assert (started.phase, started.status["partition"]) == (UPGRADING, 3)
    phases, moved = [], []
    for _ in range(12):
        cluster(ctx)
        result = run(rec, ctx)
        phases.append(result.phase)
        if result.phase == REPLACING:
            moved.append(int(re.match(r"ordinal (\d+)", result.message).group(1)))
        if result.phase == RUNNING:
            break
    assert moved == [2, 1, 0]
    assert phases == [REPLACING, UPGRADING, REPLACING, UPGRADING, REPLACING, RUNNING]
    assert ctx.obj["status"]["ordinals"][0]["zone"] == "zone-a"
    assert all(o["updated"] and o["ready"] for o in ctx.obj["status"]["ordinals"])


def test_an_exhausted_budget_blocks_and_the_upgrade_resumes_when_the_pod_is_ready_again():
    rec, ctx = running()
    ctx.spec = kvstore.KVStoreSpec.model_validate({**ctx.obj["spec"], "image": "redis:7.4"})
    run(rec, ctx)  # Upgrading, partition 3
    cluster(ctx, unready={0})
    blocked = run(rec, ctx)
    assert (blocked.phase, blocked.reason) == (BLOCKED, ou.BUDGET_EXHAUSTED)
    assert "not Ready: kv-0" in blocked.message
    assert ctx.find("apps/v1", "StatefulSet", "db", "kv")["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    assert [c.status for c in blocked.conditions if c.type == "UpgradeBlocked"] == ["True"]
    cluster(ctx)
    resumed = run(rec, ctx)
    assert resumed.phase == REPLACING and resumed.message.startswith("ordinal 2")


def test_a_run_killed_after_moving_the_partition_resumes_from_it_without_moving_another():
    rec, ctx = running()
    ctx.spec = kvstore.KVStoreSpec.model_validate({**ctx.obj["spec"], "image": "redis:7.4"})
    run(rec, ctx)
    cluster(ctx)
    before = dict(ctx.obj["status"])
    rec.reconcile(ctx, ctx.obj)  # moved ordinal 2, then died before its status was written
    ctx.obj["status"] = before
    cluster(ctx, replace=False)
    again = run(rec, ctx)
    assert (again.phase, again.reason) == (REPLACING, "OrdinalMoved") and again.message.startswith("ordinal 2: ")
    assert ctx.find("apps/v1", "StatefulSet", "db", "kv")["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    assert again.status["stepOrdinal"] == 2


def test_the_moved_ordinal_not_ready_within_the_deadline_blocks(monkeypatch):
    rec, ctx = running()
    ctx.spec = kvstore.KVStoreSpec.model_validate({**ctx.obj["spec"], "image": "redis:7.4",
                                                    "progressDeadlineSeconds": 5})
    run(rec, ctx)
    cluster(ctx)
    now = {"t": 1_800_000_000.0}
    monkeypatch.setattr(kvstore, "_now", lambda: now["t"])
    assert run(rec, ctx).phase == REPLACING
    cluster(ctx, unready={2})
    assert run(rec, ctx).phase == REPLACING
    now["t"] += 6
    blocked = run(rec, ctx)
    assert (blocked.phase, blocked.reason) == (BLOCKED, ou.DEADLINE_EXCEEDED)
    cluster(ctx)
    assert run(rec, ctx).phase == UPGRADING  # kv-2 Ready at last: verified, the next step follows


def test_the_validating_webhook_refuses_a_budget_never_met_with_the_reason():
    def review(obj):
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u-1", "operation": "CREATE", "namespace": "db", "name": "kv",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]}, "object": obj}}

    refused = review_validate(KVStoreReconciler(), review(cr(min_available="100%")))
    assert not refused.allowed and refused.code == 422
    assert any(r.startswith("spec.minAvailable: minAvailable 100% keeps 3 of 3") for r in refused.reasons)
    assert review_validate(KVStoreReconciler(), review(cr(min_available="60%"))).allowed
    bad_type = review_validate(KVStoreReconciler(), review(cr(min_available=True)))
    assert not bad_type.allowed and any("minAvailable" in r for r in bad_type.reasons)


def test_a_run_killed_after_moving_the_partition_whose_pod_is_ready_since_still_records_that_step_once():
    rec, ctx = running()
    ctx.spec = kvstore.KVStoreSpec.model_validate({**ctx.obj["spec"], "image": "redis:7.4"})
    run(rec, ctx)
    cluster(ctx)
    before = dict(ctx.obj["status"])
    rec.reconcile(ctx, ctx.obj)  # moved ordinal 2 and died before its status; kv-2 is replaced and Ready since
    ctx.obj["status"] = before
    cluster(ctx)
    phases, moved = [], []
    for _ in range(12):
        result = run(rec, ctx)
        phases.append((result.phase, result.reason))
        if result.phase == REPLACING and result.reason == "OrdinalMoved":
            moved.append(int(re.match(r"ordinal (\d+)", result.message).group(1)))
        if result.phase == RUNNING:
            break
        cluster(ctx)
    assert moved == [2, 1, 0]
    assert phases[:2] == [(REPLACING, "OrdinalMoved"), (UPGRADING, "OrdinalUpgraded")]
