"""Issue 38 end to end (kubesim + Redis + real workers + the controller's healing step + the database): a GitOps
tool's self-heal re-applying a bad spec the engine rolled back does not start a fight. Before, four re-applies gave
four automatic rollbacks. Now one rollback, then a person: the first apply is rolled back; the first repeat is
deferred (`rollback.deferred`, until when) and, still bad when its back-off has passed, escalated to a person
(`rollback.refused`, naming the repeat and who re-applied it) instead of rolled back again; the third and fourth
applies (the same spec again: no new generation) change nothing."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest
from django.core.management import call_command

from kubesim.testing import wait_for
from reconcilers.core.meta import AUTO_ROLLBACK
from reconcilers.engine import kube
from reconcilers.models import HealingAction, HealingRecord, Resource
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: a fast healing step and a short back-off (the first repeat's), so the test sees the deferral end
BACKOFF = 2
ENGINE_EXTRA_ENV = {
    "OPSCONSOLE_HEALING_INTERVAL": "0.3",
    "OPSCONSOLE_ROLLBACK_BACKOFF_SECONDS": str(BACKOFF),
    "OPSCONSOLE_HEALING": json.dumps({"Gadget": {"verify_seconds": 30}}),
}


def count(uid: str, action: str) -> int:
    return HealingRecord.objects.filter(resource_uid=uid, action=action).count()


def reapply(kapi, namespace: str, name: str) -> dict:
    """What Argo CD's self-heal does: apply the spec in git (the bad one) under its field manager."""
    return kube.request_json(kapi, "PATCH", kube.object_path(GADGET, namespace, name),
                             body={"spec": {"mode": "permanent"}}, query={"fieldManager": "argocd-controller"},
                             content_type=kube.MERGE_PATCH)


def test_four_re_applies_of_a_bad_spec_give_one_rollback_then_a_person_naming_the_re_applier(integration, kapi,
                                                                                        namespace):
    obj = gadget(namespace, "gitops", mode="ok")
    obj["metadata"]["annotations"] = {AUTO_ROLLBACK: "true"}
    uid = kube.create_object(kapi, GADGET, obj)["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)

    def rolled_back(n: int) -> None:
        wait_for(lambda: count(uid, HealingAction.ROLLBACK_SUCCEEDED) >= n, timeout=30, interval=0.1)

    reapply(kapi, namespace, "gitops")  # 1: generation 2, rolled back at once (generation 3)
    rolled_back(1)
    reapply(kapi, namespace, "gitops")  # 2: generation 4, the first repeat: deferred
    wait_for(lambda: count(uid, HealingAction.ROLLBACK_DEFERRED) == 1, timeout=30, interval=0.1)
    deferred = HealingRecord.objects.get(resource_uid=uid, action=HealingAction.ROLLBACK_DEFERRED)
    until = datetime.fromisoformat(deferred.detail["until"])
    assert deferred.detail["repeat"] == 1 and deferred.detail["reapplier"] == "manager:argocd-controller"
    assert abs((until - deferred.created_at).total_seconds() - BACKOFF) < 0.01 and deferred.detail["until"] in \
        deferred.message
    wait_for(lambda: count(uid, HealingAction.ROLLBACK_REFUSED) == 1, timeout=30, interval=0.1)
    refused = HealingRecord.objects.get(resource_uid=uid, action=HealingAction.ROLLBACK_REFUSED)
    assert refused.created_at >= until  # not before the back-off ended
    assert "repeat 1" in refused.reason and "re-applied by manager:argocd-controller" in refused.reason
    assert refused.actor == "controller" and refused.generation == 4
    reapply(kapi, namespace, "gitops")  # 3 and 4: the same spec again, no new generation
    reapply(kapi, namespace, "gitops")
    time.sleep(1.0)  # several healing steps: nothing more may happen
    assert (count(uid, HealingAction.ROLLBACK_STARTED), count(uid, HealingAction.ROLLBACK_DEFERRED),
            count(uid, HealingAction.ROLLBACK_REFUSED)) == (1, 1, 1)
    live = kube.get_object(kapi, GADGET, namespace, "gitops")
    assert live["metadata"]["generation"] == 4 and live["spec"]["mode"] == "permanent"
    resource = Resource.objects.get(uid=uid)
    assert resource.rollback["state"] == "refused" and "rollback_failed" in resource.active_anomalies
    call_command("audit_verify")
