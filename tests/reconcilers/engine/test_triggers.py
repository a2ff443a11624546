"""Issue 42, triggers on record: every run says why it ran. The controller records each key's trigger (the watch
event, what changed and who wrote it, a resync, a manual request), coalesced and bounded in the workqueue's `why`
entry; the claim hands them to the run, which completes the actor from the record and keeps them on its row; a
run that puts its key back says so to the next one; a trigger re-enqueuing the same key too often is a loop
anomaly naming it."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.conf import settings

from reconcilers.engine import admitted, kube, metrics, runner, triggers
from reconcilers.engine.controller.events import InformerEvent
from reconcilers.engine.controller.feed import QueueFeed
from reconcilers.engine.controller.handoff import Handoff
from reconcilers.engine.controller.routing import primary_trigger
from reconcilers.engine.triggers import decode, encode
from reconcilers.models import Anomaly, AnomalyCategory, ReconcileRequest, ReconcileRun
from tests.reconcilers.testkinds import GADGET


def obj(name: str = "a", *, generation: int = 1, status: dict | None = None, managed: list | None = None,
        **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": generation,
                            "resourceVersion": "1", "annotations": annotations}
    if managed is not None:
        meta["managedFields"] = managed
    return {"metadata": meta, "spec": {"n": generation}, "status": status or {}}


def mf(manager: str, time: str, subresource: str = "") -> dict[str, Any]:
    out = {"manager": manager, "operation": "Update", "time": time, "fieldsV1": {}}
    if subresource:
        out["subresource"] = subresource
    return out


# -- the triggers themselves (pure) ------------------------------------------------------------------------------


def test_a_child_status_change_names_the_child_the_field_and_the_status_writer_as_a_claim():
    old = obj("web", status={"ready": 1})
    new = obj("web", status={"ready": 2}, managed=[mf("kubectl", "2026-12-07T10:00:00Z"),
                                                   mf("kube-controller-manager", "2026-12-07T10:05:00Z", "status"),
                                                   mf("old-status", "2026-12-07T09:00:00Z", "status")])
    fields = triggers.child_fields(new, old)
    assert fields == ["status"]
    t = triggers.event_trigger("MODIFIED", "Deployment", new, old, role=triggers.CHILD, fields=fields, at=1.0)
    assert t["object"] == {"kind": "Deployment", "namespace": "ns", "name": "web"}
    assert (t["actor"], t["established"]) == ("manager:kube-controller-manager", "claim")
    assert triggers.label(t) == "child"
    assert "child Deployment ns/web changed (status) by manager:kube-controller-manager (claim)" == \
        triggers.describe(t)


def test_a_spec_change_names_generation_and_the_resource_writer_and_an_annotation_request_is_manual():
    old, new = obj(generation=1), obj(generation=2, managed=[mf("kubectl-edit", "2026-12-07T10:00:00Z")])
    event = InformerEvent("MODIFIED", GADGET, new, old)
    t = primary_trigger(event)
    assert t["fields"] == ["generation"] and t["actor"] == "manager:kubectl-edit" and triggers.label(t) == "watch"
    asked = obj(generation=1, **{"opsconsole.io/reconcile-requested-at": "tok-1"})
    t = primary_trigger(InformerEvent("MODIFIED", GADGET, asked, old))
    assert t["type"] == "manual" and t["token"] == "tok-1"
    assert triggers.label(primary_trigger(InformerEvent("ADDED", GADGET, new))) == "created"


def test_coalesced_triggers_are_bounded_and_the_rest_counted_and_the_wire_format_round_trips():
    many = [triggers.resync_trigger(at=float(i)) for i in range(11)]
    kept, dropped = triggers.merge([], 2, many)
    assert len(kept) == triggers.BOUND and dropped == 2 + 11 - triggers.BOUND
    assert decode(encode(kept, dropped)) == (kept, dropped)
    assert decode("") == ([], 0) and decode("garbage") == ([], 0)
    assert decode("1\n{bad json\n") == ([], 2)  # a malformed line never fails a run: counted


def test_the_same_trigger_on_the_same_key_more_than_the_limit_in_a_minute_is_marked_a_loop():
    counter = triggers.LoopCounter(limit=3)
    t = triggers.event_trigger("MODIFIED", "Gadget", obj("b"), obj("b"), role=triggers.CHILD, fields=["status"])
    marks = [counter.mark("k", t, now=100.0 + i).get("loop") for i in range(5)]
    assert marks == [None, None, None, 4, 5]
    assert counter.mark("other", t, now=104.0).get("loop") is None  # per key
    assert counter.mark("k", t, now=161.0).get("loop") is None  # a new minute


def test_the_handoff_keeps_a_key_s_triggers_together_and_gives_them_back_after_a_failed_enqueue():
    handoff = Handoff()
    for i in range(10):
        handoff.put_key("k", triggers.resync_trigger(at=float(i)))
    handoff.put_key("plain")
    _, keys = handoff.take_objects_and_keys(10)
    why = handoff.take_triggers(keys)
    assert keys == ["k", "plain"] and list(why) == ["k"]
    assert len(why["k"][0]) == triggers.BOUND and why["k"][1] == 2
    handoff.put_key("k", triggers.resync_trigger(at=99.0))
    handoff.put_keys(keys, why)  # the enqueue failed: older ones first, still bounded
    kept, dropped = handoff.take_triggers(["k"])["k"]
    assert kept[0]["at"] == 0.0 and dropped == 3


# -- through the workqueue -------------------------------------------------------------------------------------


def test_the_workqueue_appends_bounded_and_the_claim_takes_them(queue):
    queue.note({"k": encode([triggers.resync_trigger(at=1.0)])})
    queue.note({"k": encode([triggers.resync_trigger(at=float(i)) for i in range(2, 12)], 3)})
    queue.add("k")
    claim = queue.claim("k", "me")
    kept, dropped = decode(claim.why)
    assert [t["at"] for t in kept] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] and dropped == 3 + 3
    queue.done("k", "me")
    queue.add("k")
    assert queue.claim("k", "me").why == ""  # taken: the next run has only its own
    queue.note({"n": encode([triggers.requeue_trigger("error", at=1.0)])})
    queue.add("n")
    assert decode(queue.claim_next("other").why)[0][0]["reason"] == "error"


# -- on the run's record ---------------------------------------------------------------------------------------


def admit_spec(live: dict[str, Any], username: str) -> None:
    """What the webhook server notes for an admitted UPDATE of `live`'s spec by `username`."""
    meta = live["metadata"]
    request = {"operation": "UPDATE", "subResource": "", "userInfo": {"username": username},
               "namespace": meta["namespace"], "name": meta["name"], "object": live}
    admitted.admitted_note(redis.Redis.from_url(settings.REDIS_URL), admitted.signing_key(settings.SECRET_KEY),
                           GADGET.group, GADGET.kind, meta["namespace"], meta["name"],
                           admitted.entry_from_request(request))


def last_run(key: str) -> ReconcileRun:
    return ReconcileRun.objects.filter(key=key).latest("id")


@pytest.mark.integration
@pytest.mark.django_db
def test_a_spec_change_by_a_named_user_is_the_run_s_trigger_with_that_user(make, kapi, workqueue):
    key, created = make(mode="ok")
    runner.run(key)
    req_ns, name = created["metadata"]["namespace"], created["metadata"]["name"]
    seen = kube.get_object(kapi, GADGET, req_ns, name)
    changed = kube.patch_object(kapi, GADGET, req_ns, name, {"spec": {"mode": "ok", "n": 2}},
                                field_manager="kubectl-edit")
    admit_spec(changed, "dana")
    t = primary_trigger(InformerEvent("MODIFIED", GADGET, changed, seen))
    assert t["actor"] == "manager:kubectl-edit"  # what the controller saw: a claim
    workqueue.note({key: encode([t])})
    workqueue.add(key)
    runner.run(key)
    run = last_run(key)
    assert run.triggers[0]["fields"] == ["generation"]
    assert (run.triggers[0]["actor"], run.triggers[0]["established"]) == ("kube:dana", "admission")


@pytest.mark.integration
@pytest.mark.django_db
def test_a_manual_request_and_a_resync_are_the_run_s_triggers_and_its_requeue_the_next_one_s(make, kapi, workqueue):
    key, created = make(mode="ok")
    request = ReconcileRequest.objects.create(key=key, token="tok-42", actor="user:alice", reason="check")
    workqueue.note({key: encode([triggers.manual_trigger("tok-42"), triggers.resync_trigger()])})
    workqueue.add(key)
    before = metrics.RECONCILE_TRIGGERS.labels("gadget", "requeue_error")._value.get()
    runner.run(key)
    manual, resync = last_run(key).triggers
    assert (manual["type"], manual["request"], manual["actor"], manual["established"]) == (
        "manual", str(request.id), "user:alice", "session")
    assert (resync["type"], resync["actor"]) == ("resync", "controller")
    req_ns, name = created["metadata"]["namespace"], created["metadata"]["name"]
    kube.patch_object(kapi, GADGET, req_ns, name, {"spec": {"mode": "crash"}})  # the next run fails
    workqueue.add(key)
    assert runner.run(key) == "error"
    failed = last_run(key)
    kube.patch_object(kapi, GADGET, req_ns, name, {"spec": {"mode": "ok"}})
    assert runner.run(key) == "success"
    after = last_run(key)
    assert after.id != failed.id
    assert [(t["type"], t["reason"], t["run"]) for t in after.triggers] == [("requeue", "error", failed.id)]
    assert metrics.RECONCILE_TRIGGERS.labels("gadget", "requeue_error")._value.get() == before + 1


@pytest.mark.integration
@pytest.mark.django_db
def test_a_loop_between_two_objects_is_an_anomaly_naming_the_trigger(make, workqueue):
    """Two objects whose status changes enqueue each other (each the other's child): the controller's feed marks
    the trigger once it passes the limit; each run records one anomaly naming it."""
    (key_a, a), (key_b, b) = make("a", mode="ok"), make("b", mode="ok")
    runner.run(key_a)
    runner.run(key_b)
    handoff = Handoff()
    feed = QueueFeed(handoff, enqueue_many=lambda keys: keys, cache_write=lambda objects: None,
                     cache_and_enqueue=None, pump=lambda: 0, cache_prune=lambda *a: None,
                     cache_live=lambda ttl: None, names={}, clock=lambda: 1000.0, note=workqueue.note,
                     loops=triggers.LoopCounter(limit=5))
    from_b = triggers.event_trigger("MODIFIED", "Gadget", b, b, role=triggers.CHILD, fields=["status"])
    from_a = triggers.event_trigger("MODIFIED", "Gadget", a, a, role=triggers.CHILD, fields=["status"])
    for _ in range(7):
        handoff.put_key(key_a, from_b)
        handoff.put_key(key_b, from_a)
        feed.enqueue_handed_off(10)
    for key in (key_a, key_b):
        workqueue.add(key)
        runner.run(key)
    for key, other in ((key_a, "b"), (key_b, "a")):
        anomaly = Anomaly.objects.get(resource__key=key, category=AnomalyCategory.LOOP)
        assert anomaly.observed["signature"] == f"child Gadget/{a['metadata']['namespace']}/{other} status"
        assert f"child Gadget {a['metadata']['namespace']}/{other} changed (status)" in anomaly.detail
        assert anomaly.observed["count"] == 6  # the first over the limit; the next one finds it on record
    assert [t.get("loop") for t in last_run(key_a).triggers] == [None] * 5 + [6, 7]


@pytest.fixture
def spans():
    """Every span sampled and kept in memory, current for the test."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    yield exporter
    trace._TRACER_PROVIDER = previous


@pytest.mark.integration
@pytest.mark.django_db
def test_the_run_s_span_carries_its_triggers(make, workqueue, spans):
    key, _ = make(mode="ok")
    workqueue.note({key: encode([triggers.resync_trigger()], 3)})
    workqueue.add(key)
    runner.run(key)
    (span,) = [s for s in spans.get_finished_spans() if s.name == "reconcile Gadget"]
    assert list(span.attributes["opsconsole.triggers"]) == ["periodic resync"]
    assert list(span.attributes["opsconsole.triggers.labels"]) == ["resync"]
    assert span.attributes["opsconsole.triggers.dropped"] == 3
    assert last_run(key).trace_id == format(span.context.trace_id, "032x")


@pytest.mark.django_db
def test_a_spec_change_a_rollback_made_is_the_rollback_s_trigger():
    from reconcilers.engine import trigger_actors

    live = {"metadata": {"name": "g", "namespace": "ns", "uid": "u", "generation": 4}, "spec": {}}
    spec = triggers.event_trigger("MODIFIED", "Gadget", live, None, role=triggers.SELF, fields=["generation"])
    (resolved,) = trigger_actors.resolve(GADGET, live, [spec], {"actor": "rollback:auto", "generation": 4})
    assert (resolved["type"], resolved["actor"], resolved["established"]) == ("rollback", "rollback:auto", "engine")
    assert triggers.label(resolved) == "rollback"
    assert triggers.describe(resolved) == "rollback by rollback:auto (engine)"
