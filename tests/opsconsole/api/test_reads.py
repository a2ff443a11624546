"""The read endpoints: kinds, resources with each filter, detail, transitions, reconciles, the feed with its
filters, `since` cursor and exports, reconcile requests, metrics summary; cursor pagination and ordering."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.models import KubeEvent, ReconcileRequest
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def ids(response):
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_kinds_lists_each_registered_reconciler_with_its_state_machine(viewer):
    body = viewer.get("/api/v1/kinds").json()
    by_kind = {k["kind"]: k for k in body}
    assert set(by_kind) == {"Memcached", "Tenant", "KVStore"}
    machine = by_kind["Memcached"]["state_machine"]
    assert machine["initial"] == "Pending" and "Deleted" in machine["terminal"]
    assert {"from": "Terminating", "to": "Deleted"} in machine["transitions"]
    assert by_kind["Tenant"]["namespaced"] is False
    assert {"from": "Upgrading", "to": "Blocked"} in by_kind["KVStore"]["state_machine"]["transitions"]


def test_resources_are_paginated_by_cursor_in_a_stable_order(viewer):
    made = [f.resource(f"m{i}").pk for i in range(7)]
    first = viewer.get("/api/v1/resources", {"page_size": 3}).json()
    assert [r["id"] for r in first["results"]] == made[:3]
    second = viewer.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == made[3:6]
    third = viewer.get(second["next"]).json()
    assert [r["id"] for r in third["results"]] == made[6:] and third["next"] is None


def test_resources_filter_by_kind_namespace_phase_and_name(viewer):
    a = f.resource("alpha", "ns1", phase="Running")
    b = f.resource("beta", "ns2", phase="Pending")
    t = f.resource("tenant-a", kind=f.TENANT, phase="Ready")
    assert ids(viewer.get("/api/v1/resources", {"kind": "memcached"})) == [a.pk, b.pk]
    assert ids(viewer.get("/api/v1/resources", {"kind": "tenants.tenancy.example.com"})) == [t.pk]
    assert ids(viewer.get("/api/v1/resources", {"namespace": "ns2"})) == [b.pk]
    assert ids(viewer.get("/api/v1/resources", {"phase": "Running"})) == [a.pk]
    assert ids(viewer.get("/api/v1/resources", {"search": "ALP"})) == [a.pk]
    assert ids(viewer.get("/api/v1/resources", {"search": "nothing"})) == []


@pytest.mark.parametrize(("selector", "expected"), [
    ("app=web", ["web1", "web2"]),
    ("app==web,tier=front", ["web1"]),
    ("app!=web", ["db", "bare"]),
    ("app in (web,db)", ["web1", "web2", "db"]),
    ("app notin (web)", ["db", "bare"]),
    ("tier", ["web1"]),
    ("!app", ["bare"]),
])
def test_resources_filter_by_label_selector(viewer, selector, expected):
    f.resource("web1", labels={"app": "web", "tier": "front"})
    f.resource("web2", labels={"app": "web"})
    f.resource("db", labels={"app": "db"})
    f.resource("bare", labels={})
    body = viewer.get("/api/v1/resources", {"selector": selector}).json()
    assert [r["name"] for r in body["results"]] == expected


def test_a_bad_label_selector_is_a_400_naming_the_field(viewer):
    response = viewer.get("/api/v1/resources", {"selector": "app in web"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and "selector" in body["fields"]


def test_resources_filter_stuck_in_a_non_terminal_phase_for_longer_than_given(viewer):
    old = timezone.now() - timedelta(hours=2)
    stuck = f.resource("stuck", phase="Pending", since=old)
    f.resource("fresh", phase="Pending", since=timezone.now())
    f.resource("gone", phase="Deleted", since=old)
    assert ids(viewer.get("/api/v1/resources", {"stuck_for": 3600})) == [stuck.pk]
    assert viewer.get("/api/v1/resources", {"stuck_for": -1}).status_code == 400


def test_resources_filter_by_generation_lag(viewer):
    lagging = f.resource("lag", generation=3, observed_generation=2)
    never = f.resource("never", generation=1, observed_generation=None)
    ok = f.resource("ok", generation=2, observed_generation=2)
    assert ids(viewer.get("/api/v1/resources", {"generation_lag": "true"})) == [lagging.pk, never.pk]
    assert ids(viewer.get("/api/v1/resources", {"generation_lag": "false"})) == [ok.pk]
    row = viewer.get("/api/v1/resources", {"generation_lag": "true"}).json()["results"][0]
    assert row["generation_lag"] is True and row["time_in_phase_seconds"] >= 29


def test_resources_filter_by_healing_state_and_anomaly_rule(viewer):
    from reconcilers.models import Resource

    anomalous = f.resource("anomalous")
    suspended = f.resource("suspended")
    rolling = f.resource("rolling")
    f.resource("quiet")
    Resource.objects.filter(pk=anomalous.pk).update(active_anomalies={"backoff": {"since": "2026-12-01T00:00:00Z"}})
    Resource.objects.filter(pk=suspended.pk).update(suspended=True, suspension={"reason": "maintenance"})
    Resource.objects.filter(pk=rolling.pk).update(rollback={"state": "in_progress", "generation": 3})
    assert ids(viewer.get("/api/v1/resources", {"healing": "anomalous"})) == [anomalous.pk]
    assert ids(viewer.get("/api/v1/resources", {"healing": "suspended"})) == [suspended.pk]
    assert ids(viewer.get("/api/v1/resources", {"healing": "rolling_back"})) == [rolling.pk]
    assert ids(viewer.get("/api/v1/resources", {"anomaly": "backoff"})) == [anomalous.pk]
    assert ids(viewer.get("/api/v1/resources", {"anomaly": "flapping"})) == []
    bad = viewer.get("/api/v1/resources", {"healing": "sleepy"})
    assert bad.status_code == 400 and "healing" in json.dumps(bad.json())


def test_deleted_resources_are_hidden_unless_asked_for(viewer):
    gone = f.resource("gone", deleted=True)
    assert ids(viewer.get("/api/v1/resources")) == []
    assert ids(viewer.get("/api/v1/resources", {"include_deleted": "true"})) == [gone.pk]


def test_only_registered_kinds_owned_by_another_registered_kind_can_be_mirrored_children():
    from reconcilers.services.selectors.resources import mirrored_child_kinds

    assert mirrored_child_kinds() == []  # Memcached owns Deployments and Services, Tenant owns Namespaces…


def test_a_resource_lists_its_owner_and_mirrored_children(viewer, monkeypatch):
    from reconcilers.services.selectors import resources

    monkeypatch.setattr(resources, "mirrored_child_kinds", lambda: ["Memcached"])
    parent = f.resource("parent")
    child = f.resource("child", owner={"uid": parent.uid, "kind": "Memcached", "name": "parent"})
    rows = {r["name"]: r for r in viewer.get("/api/v1/resources").json()["results"]}
    assert rows["parent"]["children"] == [
        {"id": child.pk, "kind": "Memcached", "namespace": "default", "name": "child", "phase": "Running"}]
    assert rows["child"]["owner"]["uid"] == parent.uid


def test_resource_detail_has_spec_status_and_reports_an_unreachable_cluster(viewer, settings, tmp_path):
    settings.KUBECONFIG = str(tmp_path / "missing-kubeconfig")
    res = f.resource("one", spec={"size": 3}, status={"phase": "Running", "readyReplicas": 3})
    from reconcilers.engine import apiclient
    apiclient.reset()
    body = viewer.get(f"/api/v1/resources/{res.pk}").json()
    apiclient.reset()
    assert body["spec"] == {"size": 3} and body["status"]["readyReplicas"] == 3
    assert body["live_children"] == [] and body["live_children_error"]
    assert viewer.get("/api/v1/resources/999999").status_code == 404
    assert viewer.get("/api/v1/resources/abc").status_code == 404


def test_resource_transitions_and_reconciles_are_newest_first(viewer):
    res = f.resource("one", phase="")
    run = f.run(res, duration=0.25)
    t1 = f.transition(res, "Pending", run=run)
    t2 = f.transition(res, "Running")
    other = f.resource("two")
    f.transition(other, "Pending")
    assert ids(viewer.get(f"/api/v1/resources/{res.pk}/transitions")) == [t2.pk, t1.pk]
    runs = viewer.get(f"/api/v1/resources/{res.pk}/reconciles").json()["results"]
    assert [(r["id"], r["duration_seconds"], r["trace_id"]) for r in runs] == [(run.pk, 0.25, "ab" * 16)]


def test_resource_events_come_from_the_archive_one_per_event_newest_first_with_filters(viewer):
    res, other = f.resource("web"), f.resource("other")
    now = timezone.now()

    def archived(resource, uid, count, type_, minutes_ago, kind="Pod", name="web-abc-1"):
        KubeEvent.objects.create(resource=resource, event_uid=uid, count=count, name=f"{name}.{uid}", type=type_,
                                 reason="Failed" if type_ == "Warning" else "Scheduled", message=f"{uid} #{count}",
                                 involved_kind=kind, involved_namespace="default", involved_name=name,
                                 source="kubelet", first_timestamp=now - timedelta(hours=1),
                                 last_timestamp=now - timedelta(minutes=minutes_ago))

    archived(res, "pull", 1, "Warning", 30)
    archived(res, "pull", 4, "Warning", 5)
    archived(res, "sched", 1, "Normal", 50)
    archived(res, "dep", 1, "Normal", 10, kind="Deployment", name="web")
    archived(other, "theirs", 1, "Warning", 1)
    path = f"/api/v1/resources/{res.pk}/events"
    items = viewer.get(path).json()["items"]
    assert [(e["message"], e["count"], e["involved_kind"], e["involved_name"]) for e in items] == [
        ("pull #4", 4, "Pod", "web-abc-1"), ("dep #1", 1, "Deployment", "web"), ("sched #1", 1, "Pod", "web-abc-1")]
    assert items[0]["type"] == "Warning" and items[0]["last_timestamp"].endswith("Z")
    assert [e["message"] for e in viewer.get(path, {"type": "Warning"}).json()["items"]] == ["pull #4"]
    since = (now - timedelta(minutes=20)).isoformat()
    assert [e["message"] for e in viewer.get(path, {"since": since}).json()["items"]] == ["pull #4", "dep #1"]
    assert [e["message"] for e in viewer.get(path, {"limit": 1}).json()["items"]] == ["pull #4"]
    assert viewer.get(path, {"type": "Bogus"}).status_code == 400
    assert viewer.get(path, {"since": "yesterday"}).status_code == 400
    by_key = viewer.get("/api/v1/kinds/cache.example.com/Memcached/namespaces/default/web/events").json()
    assert by_key["items"] == items


def test_the_feed_is_newest_first_and_filters_by_kind_namespace_actor_and_phases(viewer):
    a = f.resource("a", "ns1", phase="")
    b = f.resource("b", "ns2", phase="")
    ta1 = f.transition(a, "Pending")
    tb1 = f.transition(b, "Pending", actor="user:alice")
    ta2 = f.transition(a, "Running")
    assert ids(viewer.get("/api/v1/transitions")) == [ta2.pk, tb1.pk, ta1.pk]
    assert ids(viewer.get("/api/v1/transitions", {"namespace": "ns1"})) == [ta2.pk, ta1.pk]
    assert ids(viewer.get("/api/v1/transitions", {"actor": "user:alice"})) == [tb1.pk]
    assert ids(viewer.get("/api/v1/transitions", {"from_phase": "Pending", "to_phase": "Running"})) == [ta2.pk]
    assert ids(viewer.get("/api/v1/transitions", {"kind": "Memcached", "name": "b"})) == [tb1.pk]
    assert ids(viewer.get("/api/v1/transitions", {"kind": "Tenant"})) == []


def test_the_feed_filters_by_time_range(viewer):
    res = f.resource("a", phase="")
    now = timezone.now()
    old = f.transition(res, "Pending", at=now - timedelta(days=2))
    new = f.transition(res, "Running", at=now - timedelta(minutes=1))
    after = (now - timedelta(days=1)).isoformat()
    assert ids(viewer.get("/api/v1/transitions", {"after": after})) == [new.pk]
    assert ids(viewer.get("/api/v1/transitions", {"before": after})) == [old.pk]
    bad = viewer.get("/api/v1/transitions", {"after": after, "before": (now - timedelta(days=3)).isoformat()})
    assert bad.status_code == 400 and "before" in bad.json()["fields"]
    assert viewer.get("/api/v1/transitions", {"after": "yesterday"}).json()["fields"]["after"]


def test_the_feed_resumes_after_a_since_cursor_oldest_first(viewer):
    res = f.resource("a", phase="")
    ts = [f.transition(res, p) for p in ("Pending", "Running", "Degraded", "Running")]
    assert ids(viewer.get("/api/v1/transitions", {"since": ts[1].pk})) == [ts[2].pk, ts[3].pk]
    page = viewer.get("/api/v1/transitions", {"since": 0, "page_size": 2}).json()
    assert [r["id"] for r in page["results"]] == [ts[0].pk, ts[1].pk]
    assert [r["id"] for r in viewer.get(page["next"]).json()["results"]] == [ts[2].pk, ts[3].pk]


def test_the_feed_exports_as_csv_and_json_lines(viewer):
    res = f.resource("a", "ns1", phase="")
    ts = [f.transition(res, p) for p in ("Pending", "Running")]
    f.transition(f.resource("b", "ns2", phase=""), "Pending")
    response = viewer.get("/api/v1/transitions.csv", {"namespace": "ns1"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [int(r["id"]) for r in rows] == [t.pk for t in ts] and rows[1]["to_phase"] == "Running"
    assert rows[0]["hash"] == ts[0].hash
    response = viewer.get("/api/v1/transitions.jsonl", {"namespace": "ns1", "limit": 1})
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [ts[0].pk]
    assert viewer.get("/api/v1/transitions.csv", {"since": "x"}).status_code == 400


def test_reconcile_requests_show_their_lifecycle(viewer):
    res = f.resource("a")
    req = ReconcileRequest.objects.create(resource=res, key=res.key, token="t1", actor="user:x", reason="why")
    body = viewer.get(f"/api/v1/reconcile-requests/{req.pk}").json()
    assert (body["state"], body["reason"], body["token"], body["run"]) == ("requested", "why", "t1", None)
    assert [r["id"] for r in viewer.get("/api/v1/reconcile-requests").json()] == [str(req.pk)]
    assert viewer.get("/api/v1/reconcile-requests/not-a-uuid").status_code == 404


def test_metrics_summary_computes_rates_latencies_and_phase_counts_from_the_database(viewer, queue):
    res = f.resource("a", phase="")
    for i in range(10):
        f.run(res, duration=(i + 1) / 10, result="error" if i < 2 else "success")
    f.transition(res, "Pending")
    f.resource("b", phase="Running")
    body = viewer.get("/api/v1/metrics/summary", {"window": 100}).json()
    assert body["source"] == "database"
    assert body["reconcile_rate"] == pytest.approx(0.1) and body["error_rate"] == pytest.approx(0.02)
    assert body["error_ratio"] == pytest.approx(0.2)
    assert body["reconcile_time_seconds"] == {"p50": 0.5, "p95": 1.0, "p99": 1.0}
    assert body["transitions_per_kind"] == {"Memcached": 1}
    assert body["phase_counts"] == {"Memcached": {"Pending": 1, "Running": 1}}
    assert body["queue_depth"] == 0
    assert viewer.get("/api/v1/metrics/summary", {"window": 0}).status_code == 400


def test_queue_shows_pending_and_backing_off_keys(viewer, queue):
    queue.add("cache.example.com/v1alpha1/memcacheds/default/a")
    queue.add_rate_limited("cache.example.com/v1alpha1/memcacheds/default/b")
    body = viewer.get("/api/v1/queue").json()
    assert [p["key"] for p in body["pending"]] == ["cache.example.com/v1alpha1/memcacheds/default/a"]
    assert [(b["key"], b["failures"]) for b in body["backing_off"]] == [
        ("cache.example.com/v1alpha1/memcacheds/default/b", 1)]
    assert body["depth"] == 1


def test_an_invalid_cursor_is_a_404_not_a_500(viewer):
    response = viewer.get("/api/v1/resources", {"cursor": "garbage"})
    assert response.status_code == 404 and response.json()["code"] == "not_found"
