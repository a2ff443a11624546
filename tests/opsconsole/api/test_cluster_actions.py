"""Actions asked by a cluster key reach that cluster: the session's kubesim plays cluster `prod` (registered with
its kubeconfig context), a reconcile annotates the object there, is recorded with the cluster and enqueues the key
with the cluster's prefix; a suspend writes there too; a registered cluster that cannot be reached answers 503
(its own client is asked, never the default cluster's); the console's header names a grant with its cluster."""

from __future__ import annotations

import pytest

from reconcilers.engine import kube
from reconcilers.engine.healing.suspend import SUSPENDED
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.opsconsole.api.test_actions import Cluster as Sim
from tests.reconcilers.testkinds import GADGET


def _base(res) -> str:
    return f"/api/v1/clusters/{res.cluster}/kinds/{res.group}/{res.kind}/namespaces/{res.namespace}/{res.name}"


@pytest.mark.django_db(transaction=True)
def test_a_reconcile_and_a_suspend_by_cluster_key_reach_that_cluster(kapi, queue, reconcilers, as_user):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    f.cluster("prod", context="kubesim")  # the session's kubesim, reached through its kubeconfig context
    sim = Sim(kapi)
    res = sim.gadget(sim.inside, "g1", cluster="prod")
    assert res.key.startswith("prod/")
    operator = as_user("operator", [f"prod/{sim.inside}"])
    response = operator.post(_base(res) + "/reconcile", {"reason": "prod"}, format="json")
    assert response.status_code == 202, response.content
    assert sim.annotation(res) == response.json()["token"]
    req = ReconcileRequest.objects.get()
    assert (req.cluster, req.key, req.resource_id) == ("prod", res.key, res.pk)
    assert queue.sent.keys == [res.key]
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.action, record.status_code, record.cluster, record.target) == (
        "resource.reconcile", 202, "prod", res.key)
    response = operator.post(_base(res) + "/suspend", {"reason": "hold"}, format="json")
    assert response.status_code == 202, response.content
    obj = kube.get_object(kapi, GADGET, res.namespace, res.name)
    assert (obj["metadata"].get("annotations") or {}).get(SUSPENDED) == "hold"
    assert ActionRecord.objects.order_by("-id").first().cluster == "prod"


@pytest.mark.django_db(transaction=True)
def test_a_cluster_that_cannot_be_reached_answers_503_not_the_default_clusters_object(kapi, queue, reconcilers,
                                                                                     as_user):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    f.cluster("far", context="no-such-context")
    sim = Sim(kapi)
    res = sim.gadget(sim.inside, "g1", cluster="far")  # the object exists in kubesim (the default cluster) too
    response = as_user("operator").post(_base(res) + "/reconcile", {"reason": "far"}, format="json")
    assert response.status_code == 503, response.content
    assert "far" in response.json()["message"]
    assert sim.annotation(res) is None and queue.sent.keys == [] and not ReconcileRequest.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_consoles_reconcile_now_checks_the_grant_in_the_objects_cluster(kapi, queue, reconcilers, as_role):
    from tests.opsconsole.console.conftest import csrf_post

    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    f.cluster("prod", context="kubesim")
    sim = Sim(kapi)
    res = sim.gadget(sim.inside, "g1", cluster="prod")
    outside = csrf_post(as_role("operator", [f"staging/{sim.inside}"]), f"/resources/{res.pk}/reconcile",
                        {"reason": "no"})
    assert outside.status_code == 404 and not ReconcileRequest.objects.exists()
    response = csrf_post(as_role("operator", [f"prod/{sim.inside}"]), f"/resources/{res.pk}/reconcile",
                         {"reason": "yes"})
    assert response.status_code == 302, response.content[:300]
    req = ReconcileRequest.objects.get()
    assert (req.cluster, req.key) == ("prod", res.key) and queue.sent.keys == [res.key]
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.outcome, record.cluster) == ("allowed", "prod")


@pytest.mark.django_db
def test_the_consoles_header_names_a_grant_with_its_cluster(as_role):
    page = as_role("viewer", ["prod/team-a", "team-b", "prod/"]).get("/tokens/").content.decode()
    assert "prod/(cluster scope), prod/team-a, team-b" in page
