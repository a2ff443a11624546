"""Issue 42: `GET …/explain` answers why an object is in its phase from the record (phase, since, the transition,
the run that made it, its triggers with their actors, the children's Events at that time, a loop anomaly), by
id, key and uid, with the object detail's authorisation (a viewer of other namespaces gets 404); `GET /runs/{id}`
and the runs list carry the triggers; `GET /slo` the objectives."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.engine import triggers
from reconcilers.models import Anomaly, AnomalyCategory, KubeEvent, ReconcileRun
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def scene():
    res = f.resource("web", "shop", phase="")
    res.phase = ""
    f.transition(res, "Pending")
    at = timezone.now() - timedelta(minutes=1)
    child = triggers.event_trigger("MODIFIED", "Deployment", {"metadata": {"name": "web", "namespace": "shop"}},
                                   None, role=triggers.CHILD, fields=["status"], at=1.0)
    spec = {**triggers.event_trigger("MODIFIED", "Memcached", {"metadata": {"name": "web", "namespace": "shop"}},
                                     None, role=triggers.SELF, fields=["generation"], at=2.0),
            "actor": "kube:dana", "established": "admission"}
    run = ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, started_at=at, duration_seconds=0.2,
                                      result="success", triggers=[child, spec], triggers_dropped=2)
    transition = f.transition(res, "Running", at=at, run=run)
    KubeEvent.objects.create(resource=res, event_uid="e1", namespace="shop", name="web.1", type="Warning",
                             reason="FailedScheduling", message="0/1 nodes", involved_kind="Pod",
                             involved_namespace="shop", involved_name="web-abc", involved_uid="pod-1",
                             last_timestamp=at - timedelta(seconds=30))
    Anomaly.objects.create(resource=res, from_phase="Running", to_phase="Running", category=AnomalyCategory.LOOP,
                           detail="a reconcile loop", observed={"signature": "child Deployment/shop/web status"})
    res.refresh_from_db()
    return res, run, transition


def test_explain_says_why_from_the_record_by_id_key_and_uid(viewer):
    res, run, transition = scene()
    body = viewer.get(f"/api/v1/resources/{res.id}/explain").json()
    assert body["phase"] == "Running"
    assert (body["transition"]["id"], body["transition"]["from_phase"], body["transition"]["to_phase"]) == (
        transition.id, "Pending", "Running")
    assert body["run"]["id"] == run.id and body["run"]["triggers_dropped"] == 2
    child, spec = body["run"]["triggers"]
    assert child["text"] == "child Deployment shop/web changed (status) by unknown (unknown)"
    assert (spec["actor"], spec["established"], spec["fields"]) == ("kube:dana", "admission", ["generation"])
    assert body["children"]["warnings"] == 1 and body["children"]["events"][0]["reason"] == "FailedScheduling"
    assert body["children"]["changed"][0]["object"]["kind"] == "Deployment"
    assert body["anomalies"][0]["trigger"] == "child Deployment/shop/web status"
    assert "is Running since" in body["summary"] and f"Made by run {run.id}" in body["summary"]
    assert "It ran because: child Deployment shop/web changed (status)" in body["summary"]
    by_key = viewer.get(f"/api/v1/kinds/{res.group}/Memcached/namespaces/shop/web/explain").json()
    by_uid = viewer.get(f"/api/v1/resources/by-uid/{res.uid}/explain").json()
    assert by_key == by_uid == body


def test_explain_and_runs_are_404_outside_the_caller_s_namespaces(as_user):
    res, run, _ = scene()
    other = as_user("viewer", ["elsewhere"])
    assert other.get(f"/api/v1/resources/{res.id}/explain").status_code == 404
    assert other.get(f"/api/v1/resources/by-uid/{res.uid}/explain").status_code == 404
    assert other.get(f"/api/v1/runs/{run.id}").status_code == 404
    assert other.get("/api/v1/runs/not-a-number").status_code == 404
    mine = as_user("viewer", ["shop"])
    assert mine.get(f"/api/v1/resources/{res.id}/explain").status_code == 200
    assert as_user(None).get(f"/api/v1/resources/{res.id}/explain").status_code in (401, 403)


def test_a_run_and_the_runs_list_carry_the_triggers(viewer):
    res, run, _ = scene()
    one = viewer.get(f"/api/v1/runs/{run.id}").json()
    assert [t["label"] for t in one["triggers_explained"]] == ["child", "watch"]
    assert one["triggers"][1]["actor"] == "kube:dana" and one["triggers_dropped"] == 2
    listed = viewer.get(f"/api/v1/resources/{res.id}/reconciles").json()["results"][0]
    assert listed["triggers"] == one["triggers"]


def test_the_slo_endpoint_lists_each_kind_s_objectives_with_three_windows(viewer):
    scene()
    body = viewer.get("/api/v1/slo").json()
    assert body and {w["window"] for w in body[0]["windows"]} == {"1h", "6h", "30d"}
    memcached = next(o for o in body if o["kind"] == "Memcached")
    assert (memcached["phase"], memcached["within_seconds"], memcached["target"]) == ("Pending", 300, 0.99)


def test_manage_py_explain_prints_the_same_answer(capsys):
    from django.core.management import CommandError, call_command

    res, run, _ = scene()
    call_command("explain", res.key)
    out = capsys.readouterr().out
    assert f"Made by run {run.id}" in out and "trigger   child Deployment shop/web changed (status)" in out
    assert "Warning  Pod web-abc: FailedScheduling" in out and "and 2 more coalesced" in out
    call_command("explain", "memcached", "shop/web", "--json")
    assert '"phase": "Running"' in capsys.readouterr().out
    with pytest.raises(CommandError, match="key: nothing on record"):
        call_command("explain", "no/such/key")
