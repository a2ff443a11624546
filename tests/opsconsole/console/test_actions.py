"""Console actions through the Django test client: "Reconcile now" and bulk Reconcile (operators) and the
queue controls (admins) go through the API's services, each recorded in the action record; a viewer's forged
POST is refused with 403 and recorded; a POST without the CSRF token is refused."""

from __future__ import annotations

import uuid

import pytest

from reconcilers.core.meta import RECONCILE_REQUESTED_AT as ANNOTATION
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import csrf_post
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = pytest.mark.django_db(transaction=True)
GADGET_KIND = {"group": GADGET.group, "version": GADGET.version, "plural": GADGET.plural, "kind": GADGET.kind}
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)


@pytest.fixture
def cluster(kapi, queue, reconcilers):
    """A namespace of its own in kubesim with Gadgets mirrored as Resource rows: `cluster(name)`."""
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    ns = f"con-{uuid.uuid4().hex[:6]}"
    kube.create_object(kapi, NAMESPACE, {"metadata": {"name": ns}})

    def make(name: str, namespace: str = ns):
        obj = kube.create_object(kapi, GADGET, gadget(namespace, name, mode="ok"))
        return f.resource(name, namespace, kind=GADGET_KIND, uid=obj["metadata"]["uid"])

    make.namespace = ns
    return make


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_reconcile_now_makes_a_request_annotates_enqueues_and_follows_it(cluster, as_role, queue, kapi):
    res = cluster("g1")
    client = as_role("operator")
    response = csrf_post(client, f"/resources/{res.pk}/reconcile", {"reason": "config changed"})
    req = ReconcileRequest.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/resources/{res.pk}/?request={req.pk}#request"
    assert req.reason == "config changed" and req.actor == f"user:{client.user.username}"
    obj = kube.get_object(kapi, GADGET, res.namespace, res.name)
    assert obj["metadata"]["annotations"][ANNOTATION] == req.token
    assert queue.sent.keys == [res.key]
    record = last_record()
    assert (record.action, record.outcome, record.status_code, record.reason) == (
        "resource.reconcile", "allowed", 202, "config changed")
    assert record.auth == "session" and record.detail["request_id"] == str(req.pk)
    page = client.get(response["Location"]).content.decode()
    assert 'id="request-progress" data-state="requested"' in page and "Waiting for a worker" in page


def test_reconcile_now_needs_a_reason(cluster, as_role):
    res = cluster("g2")
    response = csrf_post(as_role("operator"), f"/resources/{res.pk}/reconcile", {"reason": "  "})
    assert response.status_code == 400 and b"Give a reason" in response.content
    assert not ReconcileRequest.objects.exists()
    assert last_record().outcome == "rejected"


def test_a_viewers_forged_post_is_refused_and_recorded(cluster, as_role, queue):
    res = cluster("g3")
    client = as_role("viewer")
    response = csrf_post(client, f"/resources/{res.pk}/reconcile", {"reason": "sneaky"})
    assert response.status_code == 403 and b"operator role" in response.content
    assert not ReconcileRequest.objects.exists() and queue.sent.keys == []
    record = last_record()
    assert (record.actor, record.action, record.outcome, record.status_code, record.reason) == (
        client.user.username, "resource.reconcile", "refused", 403, "sneaky")
    bulk = csrf_post(client, "/resources/reconcile", {"ids": [res.pk], "reason": "sneaky"})
    assert bulk.status_code == 403 and last_record().action == "resource.reconcile_bulk"
    assert last_record().outcome == "refused"


def test_an_operator_outside_the_namespace_gets_a_404_naming_no_namespace_and_it_is_recorded(cluster, as_role):
    res = cluster("g4")
    response = csrf_post(as_role("operator", ["elsewhere"]), f"/resources/{res.pk}/reconcile", {"reason": "r"})
    assert response.status_code == 404 and res.namespace not in response.content.decode()
    assert last_record().outcome == "rejected" and "outside your namespaces" in last_record().detail["message"]
    assert last_record().target == f"resource:{res.pk}"


def test_a_post_without_the_csrf_token_is_refused(cluster, as_role):
    res = cluster("g5")
    response = as_role("operator").post(f"/resources/{res.pk}/reconcile", {"reason": "r"})
    assert response.status_code == 403
    assert not ReconcileRequest.objects.exists()


def test_bulk_reconcile_of_the_selection_requests_each_visible_one(cluster, as_role, queue):
    a, b = cluster("b1"), cluster("b2")
    hidden = f.resource("other-ns", "not-mine", kind=GADGET_KIND)
    client = as_role("operator", [cluster.namespace])
    response = csrf_post(client, "/resources/reconcile",
                         {"ids": [a.pk, b.pk, hidden.pk], "reason": "rollout", "next": "/resources/?kind=Gadget"})
    assert response.status_code == 302 and response["Location"] == "/resources/?kind=Gadget"
    assert sorted(queue.sent.keys) == sorted([a.key, b.key])
    assert ReconcileRequest.objects.filter(reason="rollout").count() == 2
    record = last_record()
    assert record.action == "resource.reconcile_bulk" and record.outcome == "allowed"
    assert record.detail["matched"] == 2
    follow = client.get("/resources/?kind=Gadget").content.decode()
    assert "Reconcile requested for 2 of 2 selected resources." in follow


def test_bulk_reconcile_with_nothing_selected_says_so(cluster, as_role):
    client = as_role("operator")
    response = csrf_post(client, "/resources/reconcile", {"reason": "r"})
    assert response.status_code == 302
    assert "select at least one resource" in client.get("/resources/").content.decode()
    assert last_record().outcome == "rejected"


def test_an_admin_retries_a_backing_off_key_now_and_resets_backoff(as_role, queue):
    key = "cache.example.com/v1alpha1/memcacheds/default/q1"
    queue.add_rate_limited(key)
    queue.add_rate_limited(key)
    client = as_role("admin")
    assert csrf_post(client, "/queue/retry-now", {"key": key}).status_code == 302
    assert last_record().action == "queue.retry_now" and last_record().detail["changed"] is True
    assert key in queue.sent.keys
    assert csrf_post(client, "/queue/reset-backoff", {"key": key}).status_code == 302
    assert queue.failures(key) == 0 and last_record().detail["failures_before"] == 2
    assert csrf_post(client, "/queue/retry-now", {"key": "nonsense"}).status_code == 302
    assert last_record().outcome == "rejected"


def test_an_operators_queue_control_is_refused_and_recorded(as_role, queue):
    key = "cache.example.com/v1alpha1/memcacheds/default/q2"
    queue.add_rate_limited(key)
    response = csrf_post(as_role("operator"), "/queue/retry-now", {"key": key})
    assert response.status_code == 403 and last_record().outcome == "refused"
    assert queue.failures(key) == 1
