"""Names of 253 characters (the longest valid) on kubesim through the engine: a Memcached's children get hashed
names and label values (Running), a Tenant whose default namespace cannot be that long is Failed with a reason
naming the limit (no retry loop), and one with spec.namespace set gets a hashed owner label (Running)."""

from __future__ import annotations

import time
import uuid

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.kinds.memcached import DEPLOYMENT, MEMCACHED, SERVICE
from reconcilers.kinds.names import label_value
from reconcilers.kinds.tenant import NAMESPACE, TENANT, TENANT_LABEL
from reconcilers.models import ReconcileRun, Resource, Transition

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def long_name() -> str:
    """253 characters, dotted like a DNS subdomain, unique per call."""
    tag = uuid.uuid4().hex[:8]
    return ".".join([tag + "a" * 55, "b" * 63, "c" * 63, "d" * 61])


def phases(uid):
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("from_phase", "to_phase"))


def recorded(uid, phase):
    return Resource.objects.filter(uid=uid, phase=phase).exists()


def test_a_memcached_named_with_253_characters_runs(integration, kapi, namespace):
    name = long_name()
    assert len(name) == 253
    obj = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
           "metadata": {"name": name, "namespace": namespace}, "spec": {"size": 1}}
    uid = kube.create_object(kapi, MEMCACHED, obj)["metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.2)
    assert phases(uid) == [("", "Pending"), ("Pending", "Running")]
    short = label_value(name)
    deployment = kube.get_object(kapi, DEPLOYMENT, namespace, short)
    service = kube.get_object(kapi, SERVICE, namespace, short)
    assert deployment is not None and service is not None
    assert deployment["metadata"]["labels"]["app.kubernetes.io/instance"] == short
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == uid
    status = kube.get_object(kapi, MEMCACHED, namespace, name)["status"]
    assert status["readyReplicas"] == 1 and len(status["nodes"]) == 1
    assert not ReconcileRun.objects.filter(resource__uid=uid, result="error").exists()


def test_a_tenant_named_with_253_characters_fails_naming_the_limit_or_runs_with_its_namespace_set(
        integration, kapi):
    name = long_name()
    tenant = {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant", "metadata": {"name": name},
              "spec": {"admins": ["alice"]}}
    uid = kube.create_object(kapi, TENANT, tenant)["metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Failed"), timeout=30, interval=0.2)
    status = kube.get_object(kapi, TENANT, None, name)["status"]
    assert status["reason"] == "InvalidSpec" and "at most 63" in status["message"], status
    time.sleep(1.0)  # a retry loop would make more runs by now
    runs = ReconcileRun.objects.filter(resource__uid=uid)
    assert runs.count() <= 2  # failed for good: no retry loop
    assert set(runs.values_list("error_class", flat=True)) == {"PermanentError"}

    namespace = f"tenant-{uuid.uuid4().hex[:8]}"
    kube.patch_object(kapi, TENANT, None, name, {"spec": {"namespace": namespace}})  # the fix the message names
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.2)
    ns = kube.get_object(kapi, NAMESPACE, None, namespace)
    assert ns["metadata"]["labels"][TENANT_LABEL] == label_value(name)

    kube.delete_object(kapi, TENANT, None, name)  # the finalizer finds its namespace by the hashed label
    wait_for(lambda: kube.get_object(kapi, TENANT, None, name) is None, timeout=30, interval=0.2)
    assert kube.get_object(kapi, NAMESPACE, None, namespace) is None
    assert phases(uid)[-2:] == [("Running", "Terminating"), ("Terminating", "Deleted")]
