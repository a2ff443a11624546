"""Issue 37 in the API: every actor comes with how it was established (`actor_established`: engine, session,
admission, claim, unknown), so a field manager's name is never taken for an identity."""

from __future__ import annotations

from reconcilers.engine.healing.records import healing_append
from reconcilers.models import HealingAction, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.opsconsole.api.test_revisions import revise


def test_the_api_says_how_each_actor_was_established(viewer):
    res = f.resource("said", phase="")
    f.transition(res, "Pending")
    f.transition(res, "Deleted", actor="kube:alice")
    revise(res, 1, {"size": 1}, "opsconsole-rollback", "2030-01-01T00:00:00Z")
    healing_append(res, HealingAction.SUSPENDED, actor="manager:opsconsole-controller", reason="x")
    res.save()
    ReconcileRequest.objects.create(resource=res, key=res.key, token="t1", actor="manager:opsconsole-controller")
    rows = viewer.get(f"/api/v1/resources/{res.pk}/transitions").json()["results"]
    assert [(r["actor"], r["actor_established"]) for r in rows] == [("kube:alice", "admission"),
                                                                    ("controller", "engine")]
    revision = viewer.get(f"/api/v1/resources/{res.pk}/revisions").json()["results"][0]
    assert (revision["actor"], revision["actor_established"]) == ("manager:opsconsole-rollback", "claim")
    record = viewer.get(f"/api/v1/resources/{res.pk}/healing").json()["records"][0]
    assert (record["actor"], record["actor_established"]) == ("manager:opsconsole-controller", "claim")
    requests = viewer.get(f"/api/v1/resources/{res.pk}/reconciles").json()
    found = [r for r in (requests.get("results") if isinstance(requests, dict) else requests) if "actor" in r]
    assert all(r["actor_established"] == "claim" for r in found)
