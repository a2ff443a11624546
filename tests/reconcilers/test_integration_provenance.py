"""Issue 37 end to end (kubesim + Redis + real Celery workers + the controller + the database), written as the
attacks: a user who may patch status, annotations or the spec borrows the engine's field-manager names
(`opsconsole-controller`, `opsconsole-rollback`) and the record must not believe them; a write the API server
admitted (noted, signed, as the webhook server does) names the Kubernetes user; a deletion nobody established is
`unknown`."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings

from kubesim.testing import wait_for
from reconcilers.core import actors
from reconcilers.core.meta import (
    FIELD_MANAGER,
    LAST_HANDLED_RECONCILE_AT,
    RECONCILE_REQUESTED_AT,
    ROLLBACK_FIELD_MANAGER,
    SUSPENDED,
)
from reconcilers.engine import admitted, dispatch, kube
from reconcilers.models import (
    ActionRecord,
    Anomaly,
    AnomalyCategory,
    HealingRecord,
    ReconcileRequest,
    RequestState,
    Resource,
    SpecRevision,
    Transition,
)
from reconcilers.services.healing import resource_rollback
from tests.fixtures.engines import wait_idle
from tests.reconcilers.test_integration_audit_completeness import create, live_status, patch_as, settled
from tests.reconcilers.testkinds import GADGET

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def admit(namespace: str, name: str, obj: dict, username: str, *, operation: str = "UPDATE",
          subresource: str = "", secret: str | None = None) -> None:
    """What the validating webhook does before it admits a write of `obj` (the object as it will be written)."""
    request = {"operation": operation, "subResource": subresource, "userInfo": {"username": username},
               "namespace": namespace, "name": name, ("oldObject" if operation == "DELETE" else "object"): obj}
    admitted.admitted_note(redis.Redis.from_url(settings.REDIS_URL),
                           admitted.signing_key(settings.SECRET_KEY if secret is None else secret),
                           GADGET.group, GADGET.kind, namespace, name, admitted.entry_from_request(request))


def transitions(uid: str) -> list[tuple[str, str, str]]:
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq")
                .values_list("from_phase", "to_phase", "actor"))


def forge_and_reconcile(kapi, namespace: str, name: str, key: str, phase: str = "Failed") -> None:
    patch_as(kapi, FIELD_MANAGER, namespace, name, {"status": {"phase": phase, "reason": "Forged"}}, "status")
    dispatch.enqueue(key)
    wait_for(lambda: live_status(kapi, namespace, name).get("phase") == "Running", timeout=30, interval=0.1)
    wait_idle(dispatch.get_queue())


def test_a_status_forged_under_the_engines_name_is_out_of_band(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "borrowed", mode="ok")
    settled(uid, "Running")
    for _ in range(4):  # four repeats made a flapping anomaly on a healthy object
        forge_and_reconcile(kapi, namespace, "borrowed", key)
    assert transitions(uid) == [("", "Pending", "controller"), ("Pending", "Running", "controller")]
    anomalies = Anomaly.objects.filter(resource__uid=uid, category=AnomalyCategory.OUT_OF_BAND)
    assert anomalies.exists()
    assert set(anomalies.values_list("actor", flat=True)) == {f"manager:{FIELD_MANAGER}"}
    assert all(a.observed["established"] == "claim" for a in anomalies)
    assert not Anomaly.objects.filter(resource__uid=uid, category=AnomalyCategory.REFUSED).exists()
    assert Resource.objects.get(uid=uid).active_anomalies == {}


def test_an_admitted_status_write_names_the_kubernetes_user(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "admitted-status", mode="ok")
    settled(uid, "Running")
    obj = kube.get_object(kapi, GADGET, namespace, "admitted-status")
    admit(namespace, "admitted-status", {**obj, "status": {**obj["status"], "phase": "Failed"}}, "erin",
          subresource="status")
    forge_and_reconcile(kapi, namespace, "admitted-status", key)
    anomaly = Anomaly.objects.get(resource__uid=uid, category=AnomalyCategory.OUT_OF_BAND)
    assert anomaly.actor == "kube:erin" and anomaly.observed["manager"] == FIELD_MANAGER
    assert transitions(uid)[-1] == ("Pending", "Running", "controller")


def test_the_reconcile_annotation_under_the_engines_name_is_a_request_with_a_claim(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "asked", mode="ok")
    settled(uid, "Running")
    token = "2030-01-01T00:00:00.000007Z"
    patch_as(kapi, FIELD_MANAGER, namespace, "asked", {"metadata": {"annotations": {RECONCILE_REQUESTED_AT: token}}})
    wait_for(lambda: ReconcileRequest.objects.filter(key=key, token=token, state=RequestState.SUCCEEDED).exists(),
             timeout=30, interval=0.1)
    request = ReconcileRequest.objects.get(key=key, token=token)
    assert request.actor == f"manager:{FIELD_MANAGER}" and actors.is_claim(request.actor)
    action = ActionRecord.objects.get(target=key, action="resource.reconcile")
    assert (action.actor, action.auth) == (f"manager:{FIELD_MANAGER}", "manager-claim")
    assert live_status(kapi, namespace, "asked")[LAST_HANDLED_RECONCILE_AT] == token


def test_an_admitted_annotation_and_spec_name_the_kubernetes_user_a_bad_signature_does_not(
        integration, kapi, namespace):
    key, uid = create(kapi, namespace, "by-frank", mode="ok", n=0)
    settled(uid, "Running")
    obj = kube.get_object(kapi, GADGET, namespace, "by-frank")
    token = "2030-01-01T00:00:00.000008Z"
    annotated = {**obj, "metadata": {**obj["metadata"], "annotations": {RECONCILE_REQUESTED_AT: token}}}
    admit(namespace, "by-frank", annotated, "system:admin", secret="a-forged-key")  # someone with Redis only
    admit(namespace, "by-frank", annotated, "frank")
    patch_as(kapi, "kubectl-annotate", namespace, "by-frank",
             {"metadata": {"annotations": {RECONCILE_REQUESTED_AT: token}}})
    wait_for(lambda: ReconcileRequest.objects.filter(key=key, token=token, state=RequestState.SUCCEEDED).exists(),
             timeout=30, interval=0.1)
    assert ReconcileRequest.objects.get(key=key, token=token).actor == "kube:frank"
    assert ActionRecord.objects.get(target=key, action="resource.reconcile").auth == "kube-admission"

    wait_idle(dispatch.get_queue())
    admit(namespace, "by-frank", {**obj, "spec": {**obj["spec"], "n": 1}}, "mallory", secret="a-forged-key")
    patch_as(kapi, "kubectl-edit", namespace, "by-frank", {"spec": {"n": 1}})
    wait_for(lambda: SpecRevision.objects.filter(resource_uid=uid, generation=2).exists(), timeout=30, interval=0.1)
    assert SpecRevision.objects.get(resource_uid=uid, generation=2).actor == "manager:kubectl-edit"
    wait_idle(dispatch.get_queue())
    admit(namespace, "by-frank", {**obj, "spec": {**obj["spec"], "n": 2}}, "frank")
    patch_as(kapi, "kubectl-edit", namespace, "by-frank", {"spec": {"n": 2}})
    wait_for(lambda: SpecRevision.objects.filter(resource_uid=uid, generation=3).exists(), timeout=30, interval=0.1)
    assert SpecRevision.objects.get(resource_uid=uid, generation=3).actor == "kube:frank"
    wait_idle(dispatch.get_queue())


def test_a_spec_under_the_rollback_manager_is_not_credited_to_a_rollback(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "not-rolled-back", mode="ok", n=0)
    settled(uid, "Running")
    patch_as(kapi, ROLLBACK_FIELD_MANAGER, namespace, "not-rolled-back", {"spec": {"n": 5}})
    wait_for(lambda: SpecRevision.objects.filter(resource_uid=uid, generation=2).exists(), timeout=30, interval=0.1)
    wait_idle(dispatch.get_queue())
    revision = SpecRevision.objects.get(resource_uid=uid, generation=2)
    assert revision.actor == f"manager:{ROLLBACK_FIELD_MANAGER}" and actors.established(revision.actor) == "claim"
    assert not Transition.objects.filter(resource_uid=uid, actor__startswith="rollback:").exists()
    # a real rollback's generation is told apart from the borrowed name: it is the rollback's own
    resource_rollback(Resource.objects.get(uid=uid), 1, actor="user:alice", reason="back to n=0")
    wait_for(lambda: SpecRevision.objects.filter(resource_uid=uid, generation=3).exists(), timeout=30, interval=0.1)
    wait_idle(dispatch.get_queue())
    assert SpecRevision.objects.get(resource_uid=uid, generation=3).actor == "rollback:user:alice"
    assert SpecRevision.objects.get(resource_uid=uid, generation=2).actor == f"manager:{ROLLBACK_FIELD_MANAGER}"


def test_a_suspension_annotation_under_the_engines_name_is_recorded_as_a_claim(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "paused", mode="ok")
    settled(uid, "Running")
    patch_as(kapi, FIELD_MANAGER, namespace, "paused", {"metadata": {"annotations": {SUSPENDED: "maintenance"}}})
    dispatch.enqueue(key)
    wait_for(lambda: Resource.objects.filter(uid=uid, suspended=True).exists(), timeout=30, interval=0.1)
    wait_idle(dispatch.get_queue())
    resource = Resource.objects.get(uid=uid)
    assert resource.suspension["actor"] == f"manager:{FIELD_MANAGER}"
    record = HealingRecord.objects.filter(resource_uid=uid).order_by("-seq").first()
    assert record.actor == f"manager:{FIELD_MANAGER}" and record.detail["established"] == "claim"
    patch_as(kapi, "kubectl-annotate", namespace, "paused", {"metadata": {"annotations": {SUSPENDED: None}}})
    dispatch.enqueue(key)
    wait_for(lambda: Resource.objects.filter(uid=uid, suspended=False).exists(), timeout=30, interval=0.1)
    wait_idle(dispatch.get_queue())
    resumed = HealingRecord.objects.filter(resource_uid=uid).order_by("-seq").first()
    assert resumed.actor == "unknown"  # a removal without an admitted write: nobody established


def test_a_deletion_request_is_the_deleters_never_the_controllers(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "deleted-by", mode="ok")
    settled(uid, "Running")
    kube.delete_object(kapi, GADGET, namespace, "deleted-by")
    wait_for(lambda: Resource.objects.filter(uid=uid, deleted=True).exists(), timeout=30, interval=0.1)
    wait_idle(dispatch.get_queue())
    rows = transitions(uid)
    assert ("Running", "Terminating", "unknown") in rows  # who asked for the deletion: not established
    assert ("Terminating", "Deleted", "controller") in rows  # the cleanup the engine itself did
