"""Issue 42, the controller's side of triggers, against a real kubesim: a child's status change enqueues its owner
with a trigger naming the child, the field that changed and who wrote it (the field manager: a claim); a resync
says it is one; the triggers go to the workqueue (`note`) before their keys."""

from __future__ import annotations

import threading
import time

import pytest

from reconcilers.engine import kube, triggers
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import DEPLOYMENT, WIDGET, WidgetReconciler, widget


class Noted:
    """The fake workqueue: keys enqueued, triggers noted (decoded), in the order they came."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.order: list[tuple[str, str]] = []
        self.why: dict[str, list[dict]] = {}

    def enqueue(self, key: str) -> bool:
        with self.lock:
            self.order.append(("add", key))
        return True

    def note(self, why: dict[str, str]) -> None:
        with self.lock:
            for key, raw in why.items():
                self.order.append(("note", key))
                self.why.setdefault(key, []).extend(triggers.decode(raw)[0])

    def of(self, key: str) -> list[dict]:
        with self.lock:
            return list(self.why.get(key, []))


@pytest.fixture
def controller(api, widget_kind, settings):
    settings.OPSCONSOLE_WORKQUEUE_NAME = "test-controller-triggers"
    noted = Noted()
    ctl = build_controller(api, [WidgetReconciler()], enqueue=noted.enqueue, pump=lambda: 0, mirror=False,
                           archive_events=False, heal_interval=0, checkpoint_seconds=0, queue_depths=lambda: {},
                           object_cache=False, note_triggers=noted.note)
    ctl.step()
    assert ctl.wait_synced(10)
    yield ctl, noted
    ctl.shutdown()


def drive_until(ctl, predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not ctl.step():
            ctl.handoff.wait(0.02)
        if found := predicate():
            return found
    raise AssertionError("condition not met while driving the controller")


def deployment(name: str, ns: str, owner: dict) -> dict:
    ref = {"apiVersion": WIDGET.api_version, "kind": WIDGET.kind, "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": [ref]},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def test_a_child_s_status_change_and_a_resync_are_noted_with_the_owner_s_key_before_it(api, ns, controller):
    ctl, noted = controller
    owner = kube.create_object(api, WIDGET, widget("w", ns))
    key = WIDGET.request(ns, "w").key()
    drive_until(ctl, lambda: any(t["type"] == "event" and t["event"] == "ADDED" for t in noted.of(key)))
    kube.create_object(api, DEPLOYMENT, deployment("web", ns, owner))
    path = kube.object_path(DEPLOYMENT, ns, "web", "status") + "?fieldManager=rollout-sim"
    kube.request_json(api, "PATCH", path, body={"status": {"observedGeneration": 7}}, content_type=kube.MERGE_PATCH)

    def status_trigger():
        return next((t for t in noted.of(key) if t.get("role") == "child" and t["fields"] == ["status"]
                     and t["actor"] == "manager:rollout-sim"), None)

    found = drive_until(ctl, status_trigger)
    assert found["object"] == {"kind": "Deployment", "namespace": ns, "name": "web"}
    assert found["established"] == "claim" and triggers.label(found) == "child"
    with noted.lock:
        first_note = noted.order.index(("note", key))
        assert ("add", key) in noted.order[first_note:]  # noted before the key was added
    ctl.resync()
    drive_until(ctl, lambda: any(t["type"] == "resync" for t in noted.of(key)))
    assert noted.of(key)[-1]["actor"] == "controller"
