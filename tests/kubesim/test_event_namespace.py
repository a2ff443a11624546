"""kube-apiserver's namespace rule for Events, through core/v1 and events.k8s.io/v1 (one storage): an Event in
one namespace about an object of another is refused (422 Invalid, `involvedObject.namespace ... does not match
event.namespace`), as a user limited to one namespace would try to make another namespace's object look
reported on; what kube-apiserver accepts (same namespace, cluster-scoped objects in `default`, new-style Events
with `eventTime`) still is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim.testing import KubesimHandle, running_kubesim
from tests.kubesim.conftest import raw

KUBECTL = "/usr/bin/kubectl"


def core_event(name: str, namespace: str, involved_ns: str | None, **extra: object) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                               **({"namespace": involved_ns} if involved_ns is not None else {})},
            "reason": "Forged", "message": "status set by the controller", "type": "Normal",
            "source": {"component": "opsconsole-controller"}, **extra}


@pytest.fixture()
def other(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def test_a_core_event_about_an_object_of_another_namespace_is_refused(core, ns, other):
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_event(ns, core_event("e1", ns, other))
    body = json.loads(caught.value.body)
    assert (caught.value.status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (f'Event "e1" is invalid: involvedObject.namespace: Invalid value: "{other}": does not '
                               "match event.namespace")
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "involvedObject.namespace",
                                          "message": f'Invalid value: "{other}": does not match event.namespace'}]
    assert core.list_namespaced_event(ns).items == []


def test_an_event_moved_to_another_namespaces_object_by_update_is_refused(core, ns, other):
    core.create_namespaced_event(ns, core_event("e2", ns, ns))
    moved = core_event("e2", ns, other)
    with pytest.raises(client.ApiException) as caught:
        core.replace_namespaced_event("e2", ns, moved)
    assert caught.value.status == 422 and "does not match event.namespace" in caught.value.body
    with pytest.raises(client.ApiException) as caught:
        core.patch_namespaced_event("e2", ns, {"involvedObject": {"namespace": other}})
    assert caught.value.status == 422
    assert core.read_namespaced_event("e2", ns).involved_object.namespace == ns


def test_an_events_k8s_io_event_regarding_another_namespace_without_event_time_is_refused(api_client, ns, other):
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e3", "namespace": ns},
            "regarding": {"kind": "Widget", "name": "w", "namespace": other}, "reason": "Forged", "type": "Normal",
            "note": "x"}
    with pytest.raises(client.ApiException) as caught:
        raw(api_client, "POST", f"/apis/events.k8s.io/v1/namespaces/{ns}/events", body)
    answer = json.loads(caught.value.body)
    assert caught.value.status == 422
    assert answer["message"] == (f'Event.events.k8s.io "e3" is invalid: involvedObject.namespace: Invalid value: '
                                 f'"{other}": does not match event.namespace')


def test_an_event_time_event_about_a_cluster_scoped_object_outside_default_is_refused(api_client, ns):
    events = client.EventsV1Api(api_client)
    body = client.EventsV1Event(metadata={"name": "e4", "namespace": ns}, event_time="2026-01-01T00:00:00.000000Z",
                                regarding={"kind": "Namespace", "name": ns}, reason="Forged", type="Normal",
                                action="Set", reporting_controller="example.com/x", reporting_instance="x")
    with pytest.raises(client.ApiException) as caught:
        events.create_namespaced_event(ns, body)
    assert caught.value.status == 422
    assert 'involvedObject.namespace: Invalid value: "": does not match' in json.loads(caught.value.body)["message"]


def test_what_kube_apiserver_accepts_still_is(api_client, core, ns, other):
    core.create_namespaced_event(ns, core_event("same", ns, ns))
    core.create_namespaced_event("default", core_event(f"cluster-{ns}", "default", None))
    # kube-apiserver does not compare the namespaces of an Event with eventTime (legacyValidateEvent): neither do we
    events = client.EventsV1Api(api_client)
    created = events.create_namespaced_event(ns, client.EventsV1Event(
        metadata={"name": "new-style", "namespace": ns}, event_time="2026-01-01T00:00:00.000000Z",
        regarding={"kind": "Widget", "name": "w", "namespace": other}, reason="R", type="Normal", action="Set",
        reporting_controller="example.com/x", reporting_instance="x"))
    assert created.regarding.namespace == other
    assert {e.metadata.name for e in core.list_namespaced_event(ns).items} == {"same", "new-style"}


@pytest.fixture(scope="module")
def tls_kubesim() -> Iterator[KubesimHandle]:
    with running_kubesim(tls=True, controllers=False) as k:
        yield k


@pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl is not installed at /usr/bin/kubectl")
def test_kubectl_create_of_a_cross_namespace_event_is_refused(tls_kubesim, tmp_path):
    env = dict(os.environ, KUBECONFIG=tls_kubesim.kubeconfig, HOME=str(tmp_path))
    manifest = json.dumps(core_event("e5", "default", "kube-system"))
    done = subprocess.run([shutil.which(KUBECTL) or KUBECTL, "--cache-dir", str(tmp_path / "cache"), "create", "-f",
                           "-"], input=manifest, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert ('The Event "e5" is invalid: involvedObject.namespace: Invalid value: "kube-system": does not match '
            "event.namespace") in done.stderr
