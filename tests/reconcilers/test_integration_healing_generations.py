"""Issue 38 end to end (kubesim + Redis + real workers + the controller's healing step + the database): a valid
change made while an older generation's `backoff` anomaly is still inside its window, with that generation's Warning
Events still arriving, is never rolled back. Before, the old anomaly kept matching and the new generation was
rolled back within a second, "generation 3 led to the anomaly backoff"; and, found by this test, a step that
decided about generation 2 just before generation 3 reached the cluster wrote generation 1's spec over it."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command

from kubesim.testing import wait_for
from reconcilers.core.meta import AUTO_ROLLBACK
from reconcilers.engine import kube
from reconcilers.kinds.memcached import MEMCACHED
from reconcilers.models import HealingAction, HealingRecord, KubeEvent, Resource

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ENGINE_EXTRA_ENV = {
    "OPSCONSOLE_HEALING_INTERVAL": "0.3",
    "OPSCONSOLE_HEALING": json.dumps({"Memcached": {"verify_seconds": 30}}),
}
EVENT = kube.ResourceKind("", "v1", "events", "Event")
GOOD, BROKEN = "memcached:1.6.26-alpine", "memcached:1.6-broken"


def kubelet_event(kapi: Any, pod: dict[str, Any], reason: str, n: int) -> None:
    """A Warning Event about `pod` as the kubelet writes one (a new Event each time: each counts once)."""
    meta, now = pod["metadata"], datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube.create_object(kapi, EVENT, {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"namespace": meta["namespace"], "name": f"{meta['name']}.old-{n}"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": meta["namespace"], "name": meta["name"],
                           "uid": meta["uid"], "fieldPath": "spec.containers{memcached}"},
        "reason": reason, "message": f'Back-off pulling image "{BROKEN}"', "type": "Warning", "count": 1,
        "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "kubelet"}})


def test_a_valid_change_while_an_older_generations_events_keep_arriving_is_never_rolled_back(integration, kapi,
                                                                                           namespace):
    body = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "valid", "namespace": namespace, "annotations": {AUTO_ROLLBACK: "false"}},
            "spec": {"size": 1, "image": GOOD}}
    uid = kube.create_object(kapi, MEMCACHED, body)["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)
    # generation 2 breaks (automatic rollback off for now): its anomaly is raised about generation 2
    kube.request_json(kapi, "PATCH", kube.object_path(MEMCACHED, namespace, "valid"), body={"spec": {"image": BROKEN}},
                      query={"fieldManager": "kubectl-edit"}, content_type=kube.MERGE_PATCH)
    wait_for(lambda: (Resource.objects.get(uid=uid).active_anomalies or {}).get("backoff", {}).get("generation") == 2,
             timeout=30, interval=0.1)
    pods = kube.request_json(kapi, "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    old = next(p for p in pods if any(c["image"] == BROKEN for c in p["spec"]["containers"]))
    # a valid change (generation 3) and automatic rollback on, in one write, while generation 2's anomaly is active
    kube.request_json(kapi, "PATCH", kube.object_path(MEMCACHED, namespace, "valid"),
                      body={"metadata": {"annotations": {AUTO_ROLLBACK: "true"}},
                            "spec": {"image": GOOD, "size": 2}},
                      query={"fieldManager": "kubectl-edit"}, content_type=kube.MERGE_PATCH)
    deadline, n = time.monotonic() + 6.0, 0
    while time.monotonic() < deadline:  # generation 2's Warning Events keep arriving, as the kubelet would post them
        kubelet_event(kapi, old, ("BackOff", "Failed")[n % 2], n)
        n += 1
        time.sleep(0.25)
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running", generation=3).exists(), timeout=30,
             interval=0.1)
    assert not HealingRecord.objects.filter(resource_uid=uid, action=HealingAction.ROLLBACK_STARTED).exists()
    live = kube.get_object(kapi, MEMCACHED, namespace, "valid")
    assert (live["metadata"]["generation"], live["spec"]["image"], live["spec"]["size"]) == (3, GOOD, 2)
    cleared = HealingRecord.objects.get(resource_uid=uid, action=HealingAction.ANOMALY_CLEARED, rule="backoff")
    assert cleared.reason == "superseded by generation 3"
    # the old generation's Events were archived, and none of them counts against generation 3
    late = KubeEvent.objects.filter(resource__uid=uid, name__contains=".old-")
    assert late.count() >= n // 2 and not late.filter(generation=3).exists()
    assert "backoff" not in (Resource.objects.get(uid=uid).active_anomalies or {})
    call_command("audit_verify")
