"""Issue 38, one rollout judgement, end to end (kubesim + the controller + real workers + the database): a Running
Memcached whose image is changed to a tag that cannot be pulled keeps its old pods serving, yet it is not reported
ready; once the Deployment's progress deadline passes it is Failed with that reason (automatic rollback is off)."""

from __future__ import annotations

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.kinds.memcached import DEPLOYMENT, MEMCACHED
from reconcilers.models import Resource, Transition

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_unpullable_image_is_not_reported_ready_and_fails_at_the_deployments_deadline(integration, kapi,
                                                                                       namespace):
    body = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "cache", "namespace": namespace},
            "spec": {"size": 2, "image": "memcached:1.6.26-alpine", "progressDeadlineSeconds": 2}}
    uid = kube.create_object(kapi, MEMCACHED, body)["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)
    assert kube.get_object(kapi, DEPLOYMENT, namespace, "cache")["spec"]["progressDeadlineSeconds"] == 2
    kube.request_json(kapi, "PATCH", kube.object_path(MEMCACHED, namespace, "cache"),
                      body={"spec": {"image": "memcached:1.6-doesnotexist"}}, query={"fieldManager": "kubectl-edit"},
                      content_type=kube.MERGE_PATCH)
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Failed").exists(), timeout=30, interval=0.1)

    deployment = kube.get_object(kapi, DEPLOYMENT, namespace, "cache")
    assert deployment["status"]["readyReplicas"] == 2  # the old pods served all along
    live = kube.get_object(kapi, MEMCACHED, namespace, "cache")
    assert live["status"]["reason"] == "ProgressDeadlineExceeded"
    assert live["status"]["readyReplicas"] == 0  # none of the current spec
    available = next(c for c in live["status"]["conditions"] if c["type"] == "Available")
    assert (available["status"], available["reason"]) == ("False", "ProgressDeadlineExceeded")
    # generation 2 went Running → Pending → Failed, never Running
    assert list(Transition.objects.filter(resource_uid=uid, generation=2).order_by("seq")
                .values_list("from_phase", "to_phase")) == [("Running", "Pending"), ("Pending", "Failed")]
