"""Issue 42 end to end: the engine's processes (the controller and two Celery workers on kubesim) record why each
run ran. A creation, a spec change by a named field manager (a claim: no admission webhook here) and a manual
request by a console user each appear as the trigger of the run they caused, with their actor."""

from __future__ import annotations

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.models import ReconcileRun, Resource
from reconcilers.services.reconcile_requests import reconcile_request_create
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def run_with(key: str, match) -> ReconcileRun | None:
    for run in ReconcileRun.objects.filter(key=key).order_by("id"):
        if any(match(t) for t in run.triggers):
            return run
    return None


def test_creation_spec_change_and_manual_request_are_the_runs_triggers(integration, kapi, namespace):
    obj = kube.create_object(kapi, GADGET, gadget(namespace, "why", mode="ok"))
    key, uid = GADGET.request(namespace, "why").key(), obj["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)
    created = run_with(key, lambda t: t.get("event") == "ADDED")
    assert created is not None and created.triggers[0]["object"] == {"kind": "Gadget", "namespace": namespace,
                                                                     "name": "why"}

    kube.patch_object(kapi, GADGET, namespace, "why", {"spec": {"mode": "ok", "n": 1}}, field_manager="kubectl-edit")
    changed = wait_for(lambda: run_with(key, lambda t: "generation" in (t.get("fields") or ())), timeout=30,
                       interval=0.1)
    spec = next(t for t in changed.triggers if "generation" in (t.get("fields") or ()))
    assert (spec["actor"], spec["established"]) == ("manager:kubectl-edit", "claim")

    request = reconcile_request_create(key, actor="user:alice", reason="why did it run?")
    manual = wait_for(lambda: run_with(key, lambda t: t.get("type") == "manual"), timeout=30, interval=0.1)
    trigger = next(t for t in manual.triggers if t.get("type") == "manual")
    assert (trigger["request"], trigger["actor"], trigger["established"]) == (str(request.id), "user:alice",
                                                                              "session")
