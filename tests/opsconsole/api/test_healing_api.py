"""Self-healing in the API against kubesim: a rollback restores an earlier generation's spec and is recorded (the
healing record with the actor and reason, the action record); bad input names the field; viewers are refused and
recorded; suspend annotates the object and resume clears it; pin / unpin; the summary with its records; the
same by key; another namespace's user cannot see it; the resource serializer's healing fields; the overview."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction
from django.utils import timezone

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.engine.healing.suspend import SUSPENDED
from reconcilers.engine.recording import revision_record
from reconcilers.models import ActionRecord, HealingAction, HealingRecord, Resource
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = pytest.mark.django_db(transaction=True)
GADGET_KIND = {"group": GADGET.group, "version": GADGET.version, "plural": GADGET.plural, "kind": GADGET.kind}
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)


class Cluster:
    """Two namespaces in kubesim; gadgets created there, mirrored as Resource rows with a spec revision per
    generation (as the engine records them)."""

    def __init__(self, kapi) -> None:
        self.kapi = kapi
        tag = uuid.uuid4().hex[:6]
        self.inside, self.outside = f"hin-{tag}", f"hout-{tag}"
        for ns in (self.inside, self.outside):
            kube.create_object(kapi, NAMESPACE, {"metadata": {"name": ns}})

    def _revise(self, res: Resource, live: dict) -> Resource:
        with transaction.atomic():
            locked = Resource.objects.select_for_update().get(pk=res.pk)
            revision_record(locked, live, timezone.now())
            locked.generation = int(live["metadata"]["generation"])
            locked.spec = live.get("spec") or {}
            locked.save(update_fields=["last_revision_seq", "last_transition_hash", "generation", "spec"])
        return locked

    def gadget(self, namespace: str, name: str, *, generations: int = 1) -> Resource:
        """A gadget with `generations` generations (spec.size 1, 2, …), each with its spec revision."""
        live = kube.create_object(self.kapi, GADGET, gadget(namespace, name, mode="ok", size=1))
        res = f.resource(name, namespace, kind=GADGET_KIND, uid=live["metadata"]["uid"], spec=live["spec"])
        res = self._revise(res, live)
        for size in range(2, generations + 1):
            live = kube.patch_object(self.kapi, GADGET, namespace, name, {"spec": {"size": size}})
            res = self._revise(res, live)
        return res

    def live(self, res: Resource) -> dict:
        return kube.get_object(self.kapi, GADGET, res.namespace, res.name)


@pytest.fixture
def cluster(kapi, queue, reconcilers) -> Cluster:
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    return Cluster(kapi)


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_a_rollback_restores_the_earlier_spec_and_records_who_and_why(cluster, operator, queue):
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    assert cluster.live(res)["spec"]["size"] == 2
    response = operator.post(f"/api/v1/resources/{res.pk}/rollback", {"generation": 1, "reason": "size 2 breaks"},
                             format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["action"], body["actor"], body["reason"], body["target_generation"]) == (
        "rollback.started", f"rollback:user:{operator.user.username}", "size 2 breaks", 1)
    live = cluster.live(res)
    assert live["spec"] == {"mode": "ok", "size": 1}
    assert int(live["metadata"]["generation"]) == 3
    record = HealingRecord.objects.get(resource=res, action=HealingAction.ROLLBACK_STARTED)
    assert (record.actor, record.reason) == (f"rollback:user:{operator.user.username}", "size 2 breaks")
    assert record.detail["by"] == f"user:{operator.user.username}"
    applied = HealingRecord.objects.get(resource=res, action=HealingAction.ROLLBACK_APPLIED)
    assert (applied.actor, applied.detail["generation"]) == (f"rollback:user:{operator.user.username}", 3)
    assert live["metadata"]["annotations"]["opsconsole.io/rollback-id"] == record.detail["rollback_id"]
    res.refresh_from_db()
    assert res.rollback["state"] == "in_progress"
    assert queue.sent.keys == [res.key]
    action = last_record()
    assert (action.action, action.outcome, action.status_code, action.target, action.reason) == (
        "resource.rollback", "allowed", 202, res.key, "size 2 breaks")
    # the resource serializer says so, and a second rollback while this one is verified is a 409 naming resource
    detail = operator.get(f"/api/v1/resources/{res.pk}").json()
    assert detail["rollback_state"] == "in_progress"
    again = operator.post(f"/api/v1/resources/{res.pk}/rollback", {"generation": 1, "reason": "again"}, format="json")
    assert again.status_code == 409
    assert list(again.json()["fields"]) == ["resource"]


def test_a_bad_generation_and_a_missing_reason_are_400s_naming_the_field(cluster, operator):
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    response = operator.post(f"/api/v1/resources/{res.pk}/rollback", {"generation": 2, "reason": "x"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert list(body["fields"]) == ["generation"] and body["code"] == "invalid"
    assert (last_record().outcome, last_record().status_code) == ("rejected", 400)
    response = operator.post(f"/api/v1/resources/{res.pk}/rollback", {"generation": 1}, format="json")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["reason"]
    response = operator.post(f"/api/v1/resources/{res.pk}/rollback", {"generation": "two", "reason": "x"},
                             format="json")
    assert list(response.json()["fields"]) == ["generation"]
    assert cluster.live(res)["spec"]["size"] == 2
    assert not HealingRecord.objects.filter(resource=res).exists()


def test_a_viewer_is_refused_and_recorded(cluster, viewer):
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    for sub, body in (("rollback", {"generation": 1, "reason": "x"}), ("suspend", {"reason": "x"})):
        response = viewer.post(f"/api/v1/resources/{res.pk}/{sub}", body, format="json")
        assert response.status_code == 403
        record = last_record()
        assert (record.action, record.outcome, record.status_code, record.actor) == (
            f"resource.{sub}", "refused", 403, viewer.user.username)
    assert not HealingRecord.objects.filter(resource=res).exists()


def test_suspend_annotates_and_resume_clears_it(cluster, operator, queue):
    res = cluster.gadget(cluster.inside, "g1")
    response = operator.post(f"/api/v1/resources/{res.pk}/suspend", {"reason": "maintenance", "for_seconds": 600},
                             format="json")
    assert response.status_code == 202, response.content
    assert response.json()["action"] == "suspended" and response.json()["expires_at"]
    assert (cluster.live(res)["metadata"].get("annotations") or {}).get(SUSPENDED) == "maintenance"
    res.refresh_from_db()
    assert res.suspended and res.suspension["reason"] == "maintenance"
    listed = operator.get("/api/v1/resources", {"namespace": cluster.inside}).json()["results"]
    assert [r["suspended"] for r in listed] == [True]
    response = operator.post(f"/api/v1/resources/{res.pk}/resume", {"reason": "done"}, format="json")
    assert response.status_code == 202, response.content
    assert SUSPENDED not in (cluster.live(res)["metadata"].get("annotations") or {})
    res.refresh_from_db()
    assert not res.suspended
    assert res.key in queue.sent.keys
    again = operator.post(f"/api/v1/resources/{res.pk}/resume", {"reason": "done"}, format="json")
    assert again.status_code == 409 and list(again.json()["fields"]) == ["resource"]
    both = operator.post(f"/api/v1/resources/{res.pk}/suspend",
                         {"reason": "x", "for_seconds": 5, "until": "2999-01-01T00:00:00Z"}, format="json")
    assert both.status_code == 400 and list(both.json()["fields"]) == ["until"]
    past = operator.post(f"/api/v1/resources/{res.pk}/suspend", {"reason": "x", "until": "2001-01-01T00:00:00Z"},
                         format="json")
    assert past.status_code == 400 and list(past.json()["fields"]) == ["until"]
    assert list(ActionRecord.objects.filter(action__in=["resource.suspend", "resource.resume"])
                .order_by("id").values_list("action", "status_code")) == [
        ("resource.suspend", 202), ("resource.resume", 202), ("resource.resume", 409), ("resource.suspend", 400),
        ("resource.suspend", 400)]


def test_pin_and_unpin_and_the_summary_lists_the_records_newest_first(cluster, operator):
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    assert operator.post(f"/api/v1/resources/{res.pk}/pin", {"generation": 2, "reason": "known good"},
                         format="json").status_code == 202
    res.refresh_from_db()
    assert res.pinned_generation == 2
    bad = operator.post(f"/api/v1/resources/{res.pk}/pin", {"generation": 9, "reason": "x"}, format="json")
    assert bad.status_code == 400 and list(bad.json()["fields"]) == ["generation"]
    summary = operator.get(f"/api/v1/resources/{res.pk}/healing").json()
    assert summary["pinned_generation"] == 2 and summary["suspended"] is False
    assert [r["action"] for r in summary["records"]] == ["pinned"]
    assert operator.post(f"/api/v1/resources/{res.pk}/unpin", {"reason": "no longer"},
                         format="json").status_code == 202
    summary = operator.get(f"/api/v1/resources/{res.pk}/healing", {"limit": 1}).json()
    assert summary["pinned_generation"] is None
    assert [r["action"] for r in summary["records"]] == ["unpinned"]
    assert operator.get(f"/api/v1/resources/{res.pk}/healing", {"limit": 501}).status_code == 400


def test_by_key_and_by_uid_and_namespace_limits(cluster, as_user):
    res = cluster.gadget(cluster.inside, "g1")
    inside = as_user("operator", [cluster.inside])
    outside = as_user("operator", [cluster.outside])
    key_path = f"/api/v1/kinds/{GADGET.group}/{GADGET.kind}/namespaces/{cluster.inside}/g1"
    response = inside.post(f"{key_path}/suspend", {"reason": "by key"}, format="json")
    assert response.status_code == 202, response.content
    assert inside.get(f"/api/v1/resources/by-uid/{res.uid}/healing").json()["suspended"] is True
    # another namespace's operator: 404 by id (as the reconcile action) and by key, recorded either way
    assert outside.post(f"/api/v1/resources/{res.pk}/resume", {"reason": "x"}, format="json").status_code == 404
    assert (last_record().outcome, last_record().status_code) == ("rejected", 404)
    assert outside.post(f"{key_path}/resume", {"reason": "x"}, format="json").status_code == 404
    assert last_record().status_code == 404
    assert outside.get(f"/api/v1/resources/{res.pk}/healing").status_code == 404
    res.refresh_from_db()
    assert res.suspended


def test_the_overview_counts_only_the_callers_namespaces(cluster, as_user):
    a = f.resource("a", cluster.inside, kind=GADGET_KIND, active_anomalies={"crash_loop": {"message": "x"}})
    f.resource("b", cluster.outside, kind=GADGET_KIND, suspended=True, suspension={"reason": "y"})
    inside = as_user("viewer", [cluster.inside])
    body = inside.get("/api/v1/healing").json()
    assert (body["anomalous"], body["suspended"]) == (1, 0)
    assert body["by_rule"] == [{"kind": "Gadget", "rule": "crash_loop", "count": 1}]
    row = inside.get(f"/api/v1/resources/{a.pk}").json()
    assert (row["active_anomalies"], row["suspended"], row["rollback_state"]) == (["crash_loop"], False, None)
