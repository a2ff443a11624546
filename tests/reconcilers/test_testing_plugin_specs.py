"""The plugin's spec handling and per-test failures, used as a kind author uses them: `reconcile_until` applies
the spec it is given, `update_spec` changes one as a user's patch does, a schema refusal is a `SpecRejected`
naming its fields, and `kubesim_faults` makes an image fail to pull or crash-loop for one test only."""

from __future__ import annotations

import pytest

from kubesim.testing import wait_for
from opsconsole.testing import KubesimFaults, SpecRejected
from opsconsole.testing.faults import tag_of
from reconcilers.engine import kube
from tests.reconcilers.test_testing_plugin import DEPLOYMENT, SHELF, ShelfReconciler, shelf


@pytest.fixture(scope="session")
def opsconsole_kinds():
    return [ShelfReconciler]


def deployment_replicas(kube_api, outcome) -> int:
    meta = outcome.obj["metadata"]
    return kube.get_object(kube_api, DEPLOYMENT, meta["namespace"], meta["name"])["spec"]["replicas"]


def test_reconcile_until_applies_the_spec_it_is_given(reconcile_until, kube_api):
    assert reconcile_until(shelf("grow", replicas=1), "Running").status["readyReplicas"] == 1
    outcome = reconcile_until(shelf("grow", replicas=3), "Running")
    assert outcome.status["readyReplicas"] == 3 and deployment_replicas(kube_api, outcome) == 3
    assert outcome.obj["spec"]["replicas"] == 3 and outcome.obj["metadata"]["generation"] == 2


def test_a_change_made_through_the_api_is_kept_while_the_same_spec_is_given(reconcile_once, kube_api):
    obj = shelf("kept", replicas=1)
    first = reconcile_once(obj)
    meta = first.obj["metadata"]
    kube.patch_object(kube_api, SHELF, meta["namespace"], "kept", {"spec": {"replicas": 2}})
    again = reconcile_once(obj)  # the same spec as before: the user's change stays
    assert again.obj["spec"]["replicas"] == 2 and deployment_replicas(kube_api, again) == 2


def test_update_spec_patches_the_live_object_and_the_test_dict(reconcile_once, reconcile_until, update_spec,
                                                               kube_api):
    obj = shelf("patched", replicas=1, image="nginx:1.27")
    reconcile_until(obj, "Running")
    live = update_spec(obj, replicas=2)
    assert live["spec"] == {"replicas": 2, "image": "nginx:1.27"} and live["metadata"]["generation"] == 2
    assert obj["spec"] == {"replicas": 2, "image": "nginx:1.27"}
    outcome = reconcile_until(obj, "Running")  # obj again: the change is kept, not reverted
    assert outcome.status["readyReplicas"] == 2 and deployment_replicas(kube_api, outcome) == 2
    update_spec(obj, image=None)  # None removes a field, as a merge patch does
    assert "image" not in obj["spec"]
    assert reconcile_once(obj).obj["spec"] == {"replicas": 2, "image": "nginx:1.27"}  # the CRD's default


def test_update_spec_of_an_object_never_reconciled_is_a_lookup_error(update_spec):
    with pytest.raises(LookupError, match="Shelf ghost does not exist"):
        update_spec(shelf("ghost"), replicas=2)
    with pytest.raises(ValueError, match="at least one field"):
        update_spec(shelf("ghost"))


def test_a_schema_refusal_is_a_spec_rejected_naming_the_fields(reconcile_once, update_spec):
    with pytest.raises(SpecRejected) as created:
        reconcile_once(shelf("refused", replicas=9))
    assert created.value.fields == ["spec.replicas"] and created.value.action == "create"
    assert isinstance(created.value, ValueError)
    assert "refused to create Shelf refused" in str(created.value) and "spec.replicas" in str(created.value)
    obj = shelf("refused", replicas=1)
    reconcile_once(obj)
    with pytest.raises(SpecRejected) as replaced:
        reconcile_once(shelf("refused", replicas=7))
    assert replaced.value.fields == ["spec.replicas"] and replaced.value.action == "update"
    with pytest.raises(SpecRejected) as patched:
        update_spec(obj, replicas=-1)
    assert patched.value.fields == ["spec.replicas"]
    assert obj["spec"]["replicas"] == 1  # a refused change leaves the test's dict alone


def waiting_reasons(kube_api, namespace: str) -> set[str]:
    items = kube.request_json(kube_api, "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    return {s["state"]["waiting"]["reason"] for p in items for s in (p.get("status") or {}).get("containerStatuses")
            or [] if (s.get("state") or {}).get("waiting")}


def test_kubesim_faults_make_an_image_fail_to_pull_for_this_test(reconcile_once, kubesim_faults, kube_api,
                                                                 kubesim_cluster):
    assert kubesim_faults.fail_image_pull("registry.example.com/web:2.0-RC1") == "2.0-rc1"
    outcome = reconcile_once(shelf("nopull", image="nginx:2.0-rc1"))
    namespace = outcome.obj["metadata"]["namespace"]
    assert wait_for(lambda: waiting_reasons(kube_api, namespace) & {"ErrImagePull", "ImagePullBackOff"}, 5)
    assert "2.0-rc1" in kubesim_cluster.image_markers()["broken"]


def test_kubesim_faults_make_an_image_crash_loop(reconcile_once, kubesim_faults, kube_api):
    kubesim_faults.crash_loop("nginx:1.27-oops")
    outcome = reconcile_once(shelf("crashing", image="nginx:1.27-oops"))
    namespace = outcome.obj["metadata"]["namespace"]
    assert wait_for(lambda: "CrashLoopBackOff" in waiting_reasons(kube_api, namespace), 5)


def test_kubesim_faults_are_undone_when_the_test_ends(kubesim_cluster):
    before = kubesim_cluster.image_markers()
    faults = KubesimFaults(kubesim_cluster)
    faults.fail_image_pull("x:rc9")
    faults.crash_loop("rc8")
    faults.api_errors(error_rate=0.0, latency=0.0)
    assert kubesim_cluster.image_markers() != before
    faults.restore()
    assert kubesim_cluster.image_markers() == before
    assert kubesim_cluster.faults()["error_rate"] == 0


def test_the_marker_is_the_images_tag():
    assert tag_of("nginx:does-not-exist") == "does-not-exist"
    assert tag_of("localhost:5000/team/app:V2") == "v2"
    assert tag_of("canary") == "canary"
    with pytest.raises(ValueError, match="names no tag"):
        tag_of("nginx:")
