"""Namespace grants honoured everywhere (issue 20): for a user granted namespace A, nothing of namespace B (nor of
the cluster scope, which only users granted it or every namespace see, as in the resources list) shows on the
trace page, in the metrics summary (API and the overview's numbers), in the queue's totals or in the chain-break
report; an unlimited admin sees all of it. Verifying every chain is for admins only, once a minute per user,
and on record (refusals too)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.models import ActionRecord, Resource, Span
from reconcilers.services import audit_status
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import csrf_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def spaces():
    """Namespaces A and B with a resource each (a run and two transitions each), and a cluster-scoped Tenant."""
    tag = uuid.uuid4().hex[:6]
    a, b = f"ns-a-{tag}", f"ns-b-{tag}"
    out = {"a": a, "b": b}
    for where, ns in (("a", a), ("b", b)):
        res = f.resource(f"secret-{where}-{tag}", ns)
        f.transition(res, "Pending")
        f.transition(res, "Running")
        f.run(res)
        out[f"res_{where}"] = res
    tenant = f.resource(f"tenant-{tag}", kind=f.TENANT)
    f.transition(tenant, "Pending")
    out["tenant"] = tenant
    return out


def _span(trace_id: str, name: str, **attributes: object) -> Span:
    now = timezone.now()
    return Span.objects.create(trace_id=trace_id, span_id=uuid.uuid4().hex[:16], name=name, service="worker",
                               start_time=now, end_time=now + timedelta(milliseconds=5), duration_ms=5.0,
                               attributes=attributes)


def _reconcile_trace(res: Resource) -> str:
    trace_id = uuid.uuid4().hex
    _span(trace_id, f"reconcile {res.kind}", **{"opsconsole.key": res.key})
    _span(trace_id, "GET", **{"url.path": f"/apis/x/namespaces/{res.namespace}/things/{res.name}"})
    return trace_id


def test_the_trace_page_shows_only_traces_of_the_users_namespaces(as_role, spaces):
    mine, theirs, cluster = (_reconcile_trace(spaces["res_a"]), _reconcile_trace(spaces["res_b"]),
                             _reconcile_trace(spaces["tenant"]))
    web_only = uuid.uuid4().hex
    _span(web_only, "GET /resources/", **{"url.path": "/resources/?namespace=" + spaces["b"]})
    limited = as_role("viewer", [spaces["a"]])
    assert limited.get(f"/traces/{mine}/").status_code == 200
    for trace_id in (theirs, cluster, web_only):
        response = limited.get(f"/traces/{trace_id}/")
        assert response.status_code == 404, trace_id
        html = response.content.decode()
        assert spaces["b"] not in html and spaces["res_b"].name not in html and spaces["tenant"].name not in html
    admin = as_role("admin")  # no grant: every namespace
    for trace_id in (mine, theirs, cluster, web_only):
        assert admin.get(f"/traces/{trace_id}/").status_code == 200, trace_id
    # a user granted the cluster scope sees the cluster-scoped resource's trace, as in the resources list
    assert as_role("viewer", [""]).get(f"/traces/{cluster}/").status_code == 200


def test_the_metrics_summary_counts_only_the_users_namespaces(as_user, spaces, queue, settings):
    queue.add(spaces["res_a"].key)
    queue.add(spaces["res_b"].key)
    limited = as_user("viewer", [spaces["a"]]).get("/api/v1/metrics/summary").json()
    everything = as_user("admin").get("/api/v1/metrics/summary").json()
    kind = spaces["res_a"].kind
    assert limited["phase_counts"] == {kind: {"Running": 1}}
    assert limited["transitions_per_kind"] == {kind: 2}
    assert limited["queue_depth"] == 1
    assert everything["phase_counts"][kind]["Running"] >= 2 and spaces["tenant"].kind in everything["phase_counts"]
    assert everything["transitions_per_kind"][kind] >= 4 and everything["queue_depth"] >= 2
    assert everything["reconcile_rate"] >= 2 * limited["reconcile_rate"] > 0
    # with Prometheus configured (its series carry no namespace label), a limited user still gets the database
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    again = as_user("viewer", [spaces["a"]]).get("/api/v1/metrics/summary").json()
    assert again["source"] == "database" and again["phase_counts"] == {kind: {"Running": 1}}


def test_the_queue_totals_count_only_the_users_keys(as_user, as_role, spaces, queue):
    queue.add(spaces["res_a"].key)
    queue.add(spaces["res_b"].key)
    queue.add(spaces["tenant"].key)
    queue.add_rate_limited(spaces["res_b"].key + "-x")
    limited = as_user("viewer", [spaces["a"]]).get("/api/v1/queue").json()
    assert limited["depth"] == 1 and limited["delayed_count"] == 0
    assert [p["key"] for p in limited["pending"]] == [spaces["res_a"].key]
    everything = as_user("admin").get("/api/v1/queue").json()
    assert everything["depth"] == 3 and everything["delayed_count"] == 1
    # the console's queue page and overview number the same
    html = as_role("viewer", [spaces["a"]]).get("/queue/").content.decode()
    assert spaces["b"] not in html and spaces["tenant"].name not in html
    overview = as_role("viewer", [spaces["a"]]).get("/?_live=engine").json()["fragments"]["engine"]
    assert spaces["b"] not in overview


def _break(res: Resource) -> None:
    Resource.objects.filter(pk=res.pk).update(last_transition_hash="0" * 64)  # the head no longer matches


def test_chain_breaks_are_reported_only_to_users_of_their_namespace(as_role, spaces):
    _break(spaces["res_a"])
    _break(spaces["res_b"])
    _break(spaces["tenant"])
    admin = as_role("admin")
    assert csrf_post(admin, "/audit/verify", {}).status_code == 302
    full = admin.get("/audit/").content.decode()
    assert 'id="chain-status">broken' in full
    for res in (spaces["res_a"], spaces["res_b"], spaces["tenant"]):
        assert res.uid in full
    mine = as_role("viewer", [spaces["a"]]).get("/audit/").content.decode()
    assert 'id="chain-status">broken' in mine and spaces["res_a"].uid in mine
    for leaked in (spaces["b"], spaces["res_b"].uid, spaces["res_b"].name, spaces["tenant"].uid):
        assert leaked not in mine
    assert "1 chain, 2 transitions" in mine
    # a user whose namespaces are intact sees them intact, and counts of its own chains only
    other = f"ns-c-{uuid.uuid4().hex[:6]}"
    f.transition(f.resource("c1", other), "Pending")
    status = audit_status.audit_chain_status(namespaces=frozenset({other}))
    assert status.ok and status.chains == 0  # counted at the last verification, when c1 had no transition
    clean = as_role("viewer", [other]).get("/audit/").content.decode()
    assert 'id="chain-status">intact' in clean and spaces["res_a"].uid not in clean


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_verifying_every_chain_is_refused_to_non_admins_and_recorded(as_role, role):
    client = as_role(role)
    assert 'action="/audit/verify"' not in client.get("/audit/").content.decode()
    before = ActionRecord.objects.count()
    response = csrf_post(client, "/audit/verify", {})
    assert response.status_code == 403
    (record,) = ActionRecord.objects.all().order_by("id")[before:]
    assert (record.action, record.actor, record.outcome, record.status_code) == (
        "audit.verify", client.user.username, "refused", 403)


def test_verifying_every_chain_is_throttled_per_admin_and_recorded(as_role):
    first, second = as_role("admin"), as_role("admin")
    before = ActionRecord.objects.count()
    assert csrf_post(first, "/audit/verify", {}).status_code == 302
    throttled = csrf_post(first, "/audit/verify", {})
    assert throttled.status_code == 429
    assert 50 <= int(throttled["Retry-After"]) <= 60
    assert "try again in" in throttled.content.decode()
    assert csrf_post(second, "/audit/verify", {}).status_code == 302  # per user
    records = list(ActionRecord.objects.order_by("id")[before:])
    assert [(r.action, r.actor, r.outcome, r.status_code) for r in records] == [
        ("audit.verify", first.user.username, "allowed", 202),
        ("audit.verify", first.user.username, "refused", 429),
        ("audit.verify", second.user.username, "allowed", 202),
    ]
    assert records[0].detail["ok"] is True and records[1].detail["retry_after"] >= 50
