"""Issue 15's Events archive end to end (kubesim + the controller process + real workers + the database): the
kubelet's Warning Events about a Memcached's Pod (a broken image) are archived under the Memcached, found through
the Pod's controller ownerReferences (Pod → ReplicaSet → Deployment → Memcached), and are still served by the
selector and the API after the Event objects are deleted from the cluster."""

from __future__ import annotations

import time
import uuid

import pytest
from django.utils import timezone
from kubernetes import client as k8s
from rest_framework.test import APIClient

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.kinds.memcached import MEMCACHED
from reconcilers.models import HealingRecord, KubeEvent, Resource
from reconcilers.services.selectors.resources import resource_events
from tests.opsconsole.api import factories

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def pod_warnings(uid: str) -> list[KubeEvent]:
    return list(KubeEvent.objects.filter(resource__uid=uid, involved_kind="Pod", type="Warning"))


def test_a_pods_warning_events_are_archived_under_its_memcached_and_outlive_their_deletion(integration, kapi,
                                                                                          namespace):
    body = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "pull", "namespace": namespace}, "spec": {"size": 1, "image": "memcached:broken"}}
    uid = kube.create_object(kapi, MEMCACHED, body)["metadata"]["uid"]
    wait_for(lambda: pod_warnings(uid), timeout=30, interval=0.2)
    archived = pod_warnings(uid)
    assert all(e.involved_name.startswith("pull-") and e.occurrences >= 1 and e.source for e in archived)
    assert all(e.resource.kind == "Memcached" and e.resource.name == "pull" for e in archived)

    core = k8s.CoreV1Api(kapi)
    names = {e.name for e in archived}
    for name in names:
        core.delete_namespaced_event(name, namespace)
    live_uids = {e.metadata.uid for e in core.list_namespaced_event(namespace).items}
    assert not live_uids & {e.event_uid for e in archived}  # gone from the cluster…

    resource = archived[0].resource
    shown = resource_events(resource)  # …still in the archive
    assert {e["name"] for e in shown if e["type"] == "Warning" and e["involved_kind"] == "Pod"} >= names
    user = factories.user(f"viewer-{uuid.uuid4().hex[:6]}", "viewer", [namespace])
    api = APIClient()
    api.force_login(user)
    response = api.get(f"/api/v1/resources/{resource.pk}/events", {"type": "Warning"})
    assert response.status_code == 200, response.content
    items = response.json()["items"]
    assert {e["name"] for e in items} >= names and all(e["type"] == "Warning" for e in items)


def test_the_resolver_reads_a_burst_s_pods_and_their_owners_with_one_list_each(kapi, namespace, monkeypatch) -> None:
    """Against the API server: LIST_AT Pods, each owned by an object of its own, owned by an object the informer
    told the resolver about, resolve with one LIST of Pods and one of their owners' kind, no GET. (ConfigMaps stand
    in for the ReplicaSets and the Deployment: no controller of kubesim's acts on them.)"""
    from reconcilers.engine.healing import owner_reads
    from reconcilers.engine.healing.archive import LIST_AT, ObjectRef, OwnerResolver
    from reconcilers.models import Resource

    root = Resource.objects.create(uid=str(uuid.uuid4()), key=f"cache.example.com/v1alpha1/memcacheds/{namespace}/x",
                                   group="cache.example.com", version="v1alpha1", plural="memcacheds",
                                   kind="Memcached", namespace=namespace, name="x")
    core = k8s.CoreV1Api(kapi)

    def owned_by(kind: str, name: str, uid: str) -> list[dict]:
        return [{"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": True}]

    top = core.create_namespaced_config_map(namespace, {"metadata": {"name": "top"}}).metadata
    pods = []
    for i in range(LIST_AT):
        middle = core.create_namespaced_config_map(namespace, {"metadata": {
            "name": f"x-{i}", "ownerReferences": owned_by("ConfigMap", top.name, top.uid)}}).metadata
        pod = core.create_namespaced_pod(namespace, {
            "metadata": {"name": f"x-{i}-p", "ownerReferences": owned_by("ConfigMap", middle.name, middle.uid)},
            "spec": {"containers": [{"name": "c", "image": "memcached:1.6"}]}}).metadata
        pods.append(ObjectRef("v1", "Pod", namespace, pod.name, pod.uid))
    resolver = OwnerResolver(kapi)
    resolver.remember(top.uid, root.uid)  # as an owned kind's informer does
    assert resolver.resolve(pods) == {p.uid: root.pk for p in pods}
    assert resolver.api_calls == 2  # a LIST of Pods, a LIST of ConfigMaps
    monkeypatch.setattr(owner_reads, "LIST_PAGE", 3)  # a LIST in pages (continue tokens): the same objects
    listed = owner_reads.OwnerReads(kapi)._list_live(ObjectRef("v1", "Pod", namespace, "", ""), 500)
    assert sorted(o["metadata"]["uid"] for o in listed) == sorted(p.uid for p in pods)
    assert len(owner_reads.OwnerReads(kapi)._list_live(ObjectRef("v1", "Pod", namespace, "", ""), 4)) == 4


def test_a_forged_event_about_a_memcacheds_deployment_is_one_occurrence_seen_now_and_raises_nothing(
        integration, kapi, namespace):
    """Issue 38's attack through the API server: whoever may create Events in the namespace writes one Warning
    BackOff about the Memcached's Deployment with `count: 1000000` and `lastTimestamp: 2099-01-01`. The real
    controller archives it as one occurrence at the time it saw it, and the healing step raises no `backoff`."""
    body = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "forged", "namespace": namespace}, "spec": {"size": 1, "image": "memcached:1.6"}}
    uid = kube.create_object(kapi, MEMCACHED, body)["metadata"]["uid"]
    apps = k8s.AppsV1Api(kapi)
    wait_for(lambda: apps.list_namespaced_deployment(namespace).items, timeout=30, interval=0.2)
    deployment = apps.list_namespaced_deployment(namespace).items[0].metadata
    before = timezone.now()
    k8s.CoreV1Api(kapi).create_namespaced_event(namespace, {
        "metadata": {"name": f"{deployment.name}.forged"},
        "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace,
                           "name": deployment.name, "uid": deployment.uid},
        "type": "Warning", "reason": "BackOff", "message": "Back-off pulling image", "count": 1000000,
        "firstTimestamp": "2099-01-01T00:00:00Z", "lastTimestamp": "2099-01-01T00:00:00Z",
        "source": {"component": "kubelet"}})

    def archived() -> list[KubeEvent]:
        return list(KubeEvent.objects.filter(resource__uid=uid, involved_kind="Deployment", reason="BackOff"))

    wait_for(archived, timeout=30, interval=0.2)
    (row,) = archived()
    assert row.count == 1000000 and row.occurrences == 1
    assert before <= row.first_timestamp <= row.last_timestamp <= timezone.now()  # never a future time
    time.sleep(5)  # more than two healing steps (every 2 s)
    assert "backoff" not in (Resource.objects.get(uid=uid).active_anomalies or {})
    assert not HealingRecord.objects.filter(resource_uid=uid, rule="backoff").exists()
